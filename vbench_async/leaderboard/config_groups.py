"""Which runs of a benchmark used different settings: only settings that can change a score count.

A run's result config (frames, prompt, thinking, sampling) and its evaluation recipe (`load.recipe_label`) are
compared net of what cannot move a number:
- a frame setting at the model family's own default for the benchmark: families differ in their pixel bounds by
  design (a Qwen3-VL run at its defaults is not "differently set up" from a Qwen2.5-VL run at theirs);
- the seed of a greedy decode (temperature 0 gives the same tokens under every seed);
- the sample count: a run of fewer samples is marked `partial` or `subset` already, never as other settings.
Where comparable runs still disagree, each variant gets a letter and a note naming the settings that differ, with
this run's values as they were set.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Protocol, Sequence

COMPARED = ("frames", "prompt", "thinking", "sampling")  # the result config's keys that can change a score


def family_frame_defaults(bid: str, family: str | None) -> dict[str, Any] | None:
    """The frames a run of `bid` gets with no flag for a model of `family` (None when either is unknown)."""
    from ..benchmarks import get_benchmark
    from ..errors import UserError
    from ..frames.spec import resolve_frame_spec

    if not family:
        return None
    try:
        card = get_benchmark(bid).card
        spec = resolve_frame_spec(family, card.frames, {}, {}, bid)
    except (UserError, ValueError, KeyError, TypeError):
        return None
    return {k: v for k, v in spec.to_dict().items() if k != "family"}


def comparable(config: Mapping[str, Any], frame_defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """`config` as runs are compared: frame settings at the family's default left out (as the greedy decode's seed):
    what is left differs between two runs only where a setting was chosen differently."""
    out = dict(config)
    frames = out.get("frames")
    if isinstance(frames, dict) and frame_defaults:  # a setting one family has and another lacks (`side`) too
        out["frames"] = {k: v for k, v in frames.items() if k not in frame_defaults or frame_defaults[k] != v}
    sampling = out.get("sampling")
    if isinstance(sampling, dict) and not sampling.get("temperature"):
        out["sampling"] = {k: v for k, v in sampling.items() if k != "seed"}
    return out


class Cell(Protocol):
    """One run's cell of a benchmark (a `load.BenchRun`), as compared here."""

    config: dict[str, Any] | None
    frame_defaults: dict[str, Any] | None
    config_group: str | None
    config_note: str


def mark_config_groups(cells: Sequence[Cell]) -> None:
    """Where the runs of one benchmark (`cells`) disagree on its comparable config, give each variant a letter (runs
    without a manifest: "?") and a note naming the settings that differ."""
    views = [comparable(c.config, c.frame_defaults) if c.config is not None else None for c in cells]
    keys = [_key(v) if v is not None else None for v in views]
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    if len(distinct) > 1 or (None in keys and len(cells) > 1):
        differ = differing_settings([v for v in views if v is not None])
        for c, k in zip(cells, keys):
            c.config_group = "?" if k is None else chr(ord("A") + distinct.index(k))
            c.config_note = "no manifest" if c.config is None else ", ".join(
                f"{name}={_key(_setting(c.config, name))}" for name in differ)


def differing_settings(configs: list[dict[str, Any]]) -> list[str]:
    """Dotted names of the settings (one level into nested ones: `frames.max_frames`) that differ among `configs`."""
    flats = [_flat(c) for c in configs]
    names = list(dict.fromkeys(n for f in flats for n in f))
    return [n for n in names if len({_key(f.get(n)) for f in flats}) > 1]


def _flat(cfg: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _setting(cfg: Mapping[str, Any], dotted: str) -> Any:
    head, _, tail = dotted.partition(".")
    v = cfg.get(head)
    return v.get(tail) if tail and isinstance(v, dict) else v
