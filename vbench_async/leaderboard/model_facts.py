"""What the board says about each run's model, one optional column per fact: family, parameters, language model,
vision encoder, frames, recipe, revision, date; and the size band the board filters by.

The run's own files say most of it (summary, manifest). The language model, the vision encoder and the recipe are
read from the model's folder when the manifest names one on this machine (its config.json, and the training or
tiny-model record vbench-async writes beside the weights), or from the manifest's model block where a run recorded
them; a fact nobody recorded is "–", and a column no run has a value for is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..results.manifest_record import Manifest, ModelIdentity
from ..results.summary_record import Summary
from .families import bench_frames, run_family
from .load import Run

UNKNOWN = "–"
_MAX_CHARS = 60  # a fact read from a model folder is shown whole up to this length
_MAX_FILE = 1 << 20  # config files larger than this are not read (a config.json is a few kB)


@dataclass(frozen=True)
class MetaColumn:
    key: str
    header: str
    title: str  # the header's tooltip
    numeric: bool = False
    shown: bool = False  # shown until the reader hides it


META_COLUMNS = (
    MetaColumn("family", "family", "model family", shown=True),
    MetaColumn("parameters", "params", "parameters, counted from the checkpoint's weight files", numeric=True,
               shown=True),
    MetaColumn("language_model", "language model", "the language model: its name, else its type, layers and width"),
    MetaColumn("vision_encoder", "vision encoder", "the vision encoder: its name, else its type, depth and width"),
    MetaColumn("frames", "frames", "frames sent: count, and the fixed side or per-frame pixel cap"),
    MetaColumn("recipe", "recipe", "how the checkpoint was made (its training record)"),
    MetaColumn("revision", "revision", "hub commit, or the content fingerprint of the checkpoint"),
    MetaColumn("date", "date", "the day the run started"),
)

# Size bands of the filter: (label, upper bound in parameters, exclusive).
SIZE_BANDS = (("< 1B", 1e9), ("1-4B", 4e9), ("4-10B", 10e9), ("10-30B", 30e9), ("30-80B", 80e9),
              ("80B+", float("inf")))
NO_SIZE = "size unknown"


@dataclass(frozen=True)
class Fact:
    text: str  # shown ("–" when unknown)
    sort: str | int = ""  # what the column sorts by ("" when unknown: always last)
    title: str = ""  # the cell's tooltip, where it adds to the column's


def model_facts(run: Run) -> dict[str, Fact]:
    """Every META_COLUMNS fact of `run`, by key."""
    m = run.manifest or Manifest()
    model = m.model
    folder = _model_folder(model.path)
    config = _json_file(folder / "config.json") if folder else {}
    params = model.parameters
    frames = list(dict.fromkeys(f for b in run.benchmarks.values() if (f := bench_frames(b))))
    date = str(m.started_at or "")[:10]
    return {
        "family": _fact(run_family(run)),
        "parameters": Fact(human_count(params), params or "", f"{params:,} parameters" if params else ""),
        "language_model": _fact(_recorded(model.language_model) or _part(config, "text_config")),
        "vision_encoder": _fact(_recorded(model.vision_encoder) or _part(config, "vision_config")),
        "frames": Fact(frames[0] if len(frames) == 1 else "frames vary" if frames else UNKNOWN,
                       frames[0] if len(frames) == 1 else "", "; ".join(frames)),
        "recipe": _fact(_recorded(model.recipe) or _recipe(folder, run.summary)),
        "revision": _revision(model),
        "date": _fact(date or None),
    }


def shown_columns(facts: list[dict[str, Fact]]) -> list[MetaColumn]:
    """The columns at least one run has a value for (a column of dashes says nothing)."""
    return [c for c in META_COLUMNS if any(f[c.key].text != UNKNOWN for f in facts)]


def size_band(facts: Mapping[str, Fact]) -> str:
    n = facts["parameters"].sort
    if not isinstance(n, int) or n <= 0:
        return NO_SIZE
    return next(label for label, upper in SIZE_BANDS if n < upper)


def band_order(bands: set[str]) -> list[str]:
    """The bands present, smallest first, "size unknown" last."""
    return [label for label, _ in SIZE_BANDS if label in bands] + ([NO_SIZE] if NO_SIZE in bands else [])


def human_count(n: int | None) -> str:
    """714K, 7.6B: a parameter count as model cards write it ("–" when unknown)."""
    if not isinstance(n, int) or n <= 0:
        return UNKNOWN
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def _fact(text: str | None) -> Fact:
    return Fact(text, text) if text else Fact(UNKNOWN)


def _revision(model: ModelIdentity) -> Fact:
    revision = model.revision
    fingerprint = str(model.fingerprint or "")
    if not revision and fingerprint.startswith("hub:") and "@" in fingerprint:
        revision = fingerprint.rsplit("@", 1)[1]
    rev = str(revision)[:7] if revision and revision != "unknown" else fingerprint[:7]
    if not rev:
        return Fact(UNKNOWN)
    return Fact(rev, rev, "hub revision" if revision else "content fingerprint of the checkpoint")


def _recorded(value: str | None) -> str | None:
    return _short(value) if isinstance(value, str) and value.strip() else None


def _model_folder(path: Any) -> Path | None:
    """The model's folder when the manifest names one that is on this machine."""
    if not isinstance(path, str) or not path:
        return None
    folder = Path(path).expanduser()
    try:
        return folder if folder.is_dir() else None
    except OSError:
        return None


def _json_file(path: Path) -> dict[str, Any]:
    """A small JSON object file, or {} (absent, too large, unreadable, another shape)."""
    try:
        if not path.is_file() or path.stat().st_size > _MAX_FILE:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _part(config: Mapping[str, Any], key: str) -> str | None:
    """A sub-model of a checkpoint's config.json: its hub name when the config keeps it, else its type, layers and
    width. An older config without `text_config` holds the language model's settings at the top."""
    part = config.get(key)
    if not isinstance(part, dict):
        if key != "text_config" or "num_hidden_layers" not in config:
            return None
        part = config
    name = part.get("_name_or_path")
    if isinstance(name, str) and name and not name.startswith(("/", ".", "~")):
        return _short(name)
    kind = part.get("model_type")
    layers = part.get("num_hidden_layers") or part.get("depth")
    width = part.get("hidden_size")
    if not isinstance(kind, str) or not kind:
        return None
    shape = f", {layers} layers × {width}" if isinstance(layers, int) and isinstance(width, int) else ""
    return _short(kind + shape)


def _recipe(folder: Path | None, summary: Summary) -> str | None:
    """How the checkpoint was made: a vbench-async training export says its base model and step; a built-in tiny
    model whether it was trained, from what; random weights say so."""
    if folder is not None:
        trained = _json_file(folder / "vbench_train.json")
        if trained.get("base_model"):
            step = trained.get("step")
            return _short(f"trained from {trained['base_model']}" + (f", step {step}" if step is not None else ""))
        tiny = _json_file(folder / "vbench_tiny_model.json")
        if tiny.get("trained"):
            return _short(f"trained from {tiny.get('base') or 'a tiny model'}")
    return "random weights" if summary.random_weights else None


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 1] + "…"
