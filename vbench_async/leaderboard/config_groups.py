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

from typing import Any, Mapping, Protocol, Sequence

from ..results.result_config import ResultConfig, differing, flat, shown


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


def settings(config: ResultConfig, recipe: str | None) -> dict[str, Any]:
    """The settings of a result config that can change a score, as JSON: the recipe first (where it differs, a row's
    badge names it rather than one of the settings it moved), then frames (without the family: pixel defaults follow
    it, and families differ), prompt, thinking and sampling."""
    frames = {k: v for k, v in config.frames.to_json().items() if k != "family"}
    return {"recipe": recipe, "frames": frames, "prompt": config.prompt, "thinking": config.thinking,
            "sampling": config.sampling.to_json()}


def comparable(config: ResultConfig, recipe: str | None, frame_defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """`settings` as runs are compared: frame settings at the family's default left out (as the greedy decode's seed):
    what is left differs between two runs only where a setting was chosen differently."""
    out = settings(config, recipe)
    if frame_defaults:  # a setting one family has and another lacks (`side`) too
        out["frames"] = {k: v for k, v in out["frames"].items() if k not in frame_defaults or frame_defaults[k] != v}
    if not config.sampling.temperature:
        out["sampling"] = {k: v for k, v in out["sampling"].items() if k != "seed"}
    return out


class Cell(Protocol):
    """One run's cell of a benchmark (a `load.BenchRun`), as compared here."""

    config: ResultConfig | None
    recipe: str | None
    frame_defaults: dict[str, Any] | None
    config_group: str | None
    config_note: str


def mark_config_groups(cells: Sequence[Cell]) -> None:
    """Where the runs of one benchmark (`cells`) disagree on its comparable config, give each variant a letter (runs
    without a manifest: "?") and a note naming the settings that differ."""
    views = [comparable(c.config, c.recipe, c.frame_defaults) if c.config is not None else None for c in cells]
    keys = [shown(v) if v is not None else None for v in views]
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    if len(distinct) > 1 or (None in keys and len(cells) > 1):
        differ = differing([v for v in views if v is not None])
        for c, k in zip(cells, keys):
            c.config_group = "?" if k is None else chr(ord("A") + distinct.index(k))
            if c.config is None:
                c.config_note = "no manifest"
                continue
            own = flat(settings(c.config, c.recipe))  # this run's values as they were set
            c.config_note = ", ".join(f"{name}={shown(own[name] if name in own else None)}" for name in differ)
