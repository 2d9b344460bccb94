"""Benchmark cards: the YAML files in the top-level `benchmarks/` folder, parsed into frozen dataclasses.

A card is data: where the annotations and videos are (sources), which task types it holds, which prompt template
each task type uses, the metric and official aggregation, the category fields to break scores down by, the default
frame settings and named presets. Each section is a dataclass read by `settings.from_json`: an unknown key (with a
did-you-mean), a wrong type or a value out of bounds is a `UserError` naming the file and the key path, so a typo in a
card never silently changes a score. Checks beyond types are each class's `__post_init__`.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from .. import yaml_bounded
from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..frames.frame_settings import FIELDS as FRAME_FIELDS
from ..frames.frame_settings import FrameSettings
from ..settings import from_json
from .record_mapping import RecordMapping

ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
PRESET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Frame settings a card or preset may set: FrameSettings' fields, with their bounds, but the frame side of a
# fixed-size family, which its checkpoint decides (a card's would always be overruled).
FRAME_KEYS = frozenset(FRAME_FIELDS) - {"side"}
DEFAULT_PROMPT_KEY = "default"


def _non_empty(key: str, values: tuple[str, ...]) -> None:
    if not all(values):
        raise ValueError(f"{key} must be a list of non-empty strings")


@dataclass(frozen=True)
class ClipFallback:
    """Pre-cut clip files named after their source video and time range (LiveSports, ODV-Bench).

    When a clip file is missing but its source video exists, the sample reads the source video with the clip's
    (start, end) window instead, so users need not run a trimming step (stream-copy trimming also snaps to keyframes).
    """

    pattern: str  # regex over the clip file name with groups `source`, `start`, `end`
    source_dir: str  # folder of the full videos, relative to the data root (or absolute)
    search: bool = False  # find the source by file stem anywhere below source_dir (ODV-Bench layout)

    def __post_init__(self) -> None:
        try:
            groups = set(re.compile(self.pattern).groupindex)
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regex: {exc}") from None
        if not {"source", "start", "end"} <= groups:
            raise ValueError("pattern needs named groups source, start and end")


@dataclass(frozen=True)
class UnifiedSource:
    """The predecessor's JSON/JSONL annotation file and its video folder, both relative to the data root."""

    annotation: str
    video_dir: str
    image_dir: str | None = None  # where `image_path` is relative to; defaults to video_dir
    clip_fallback: ClipFallback | None = None


@dataclass(frozen=True)
class HubFile:
    """A glob of annotation files inside the hub snapshot, with optional record-mapping overrides for them."""

    glob: str
    record: RecordMapping = field(default_factory=RecordMapping)  # only the keys it sets override the hub's


@dataclass(frozen=True)
class HubSource:
    """The official release on the Hugging Face hub: which files to fetch and how a record maps to a Sample."""

    repo: str
    files: tuple[HubFile, ...]
    record: RecordMapping = field(default_factory=RecordMapping)  # field mapping, see hub.py
    video_dir: str = "."  # relative to the snapshot folder
    revision: str | None = None
    video_files: tuple[str, ...] = ()  # archives fetched with `data fetch --with-videos`
    video_revision: str | None = None  # MVBench keeps its videos on another branch
    hook: str | None = None  # a named converter in quirks.py for releases no mapping can express
    limit: int | None = None  # keep only the first N records (ST-Align evaluates the first 2,000)
    note: str = ""  # printed by `data fetch`: unpacking steps, gated access, files that live elsewhere

    def __post_init__(self) -> None:
        if not self.files:
            raise ValueError("files must list at least one annotation file glob")
        if self.hook is None and self.record == RecordMapping():
            raise ValueError("give a record mapping or a hook")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo):
            raise ValueError(f"repo must look like owner/name, got {self.repo!r}")
        _non_empty("video_files", self.video_files)


@dataclass(frozen=True)
class Sources:
    unified: UnifiedSource | None = None
    hub: HubSource | None = None
    demo: str | None = None  # group name inside the generated synthetic suite

    def __post_init__(self) -> None:
        if not (self.unified or self.hub or self.demo):
            raise ValueError("a card needs at least one source (unified, hub or demo)")


@dataclass(frozen=True)
class Category:
    """A breakdown of scores by a record field: `by_<name>` in the aggregate."""

    name: str
    field: str
    labels: Mapping[str, str] | None = None  # raw value (as lowercase text) -> display label
    bins: tuple[float, ...] | None = None  # numeric field cut into buckets at these edges

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", {k.lower(): v for k, v in self.labels.items()} if self.labels else None)
        object.__setattr__(self, "bins", tuple(sorted(self.bins)) if self.bins else None)


@dataclass(frozen=True)
class Aggregation:
    """A card's `aggregation`: the kind (`benchmarks/aggregate.py` KINDS) and what that kind reads. Each key a card
    may write is a field here, read by `settings.from_json`: a misspelt key is refused with a did-you-mean instead of
    silently changing the headline."""

    kind: str = "micro"
    field: str | None = None  # micro: the breakdown the benchmark reports; macro: the field whose groups weigh equally
    name: str | None = None  # macro: the breakdown's name (`by_<name>`), when not the field's
    official_per: str | None = None  # micro: the official code reports one number per group of this field, no overall
    groups: int | None = dataclasses.field(default=None, metadata={"min": 1})  # macro: groups the official mean has
    merge: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # macro: parts folded into one group
    levels: tuple[str, str] | None = None  # hierarchical: (task field, category field)
    overall: str | None = dataclasses.field(default=None, metadata={"choices": ("tasks",)})  # hierarchical variant
    thresholds: tuple[float, ...] = (0.3, 0.5, 0.7)  # grounding: the IoU thresholds of R@
    headline: str | None = None  # stvg, videomathqa: which of the kind's numbers is the headline
    official_field: str | None = None  # stvg: the record field the official parser needs
    unavailable: str | None = None  # why the unified file cannot give the official headline
    unavailable_breakdowns: Mapping[str, str] = dataclasses.field(default_factory=dict)  # category -> why it is absent


PARITY_STATUSES = ("exact", "documented difference", "impossible with the unified file", "judge", "no official code")


@dataclass(frozen=True)
class Official:
    """How the benchmark's authors score it: the protocol that `scoring.score` runs for `Score.official`, the
    repository and file it reproduces, and how far our reproduction goes (`parity`, with `note` saying why)."""

    protocol: str  # a key of scoring.official.PROTOCOLS
    source: str  # "owner/repo path/to/file.py"
    parity: str = field(metadata={"choices": PARITY_STATUSES})
    note: str = ""

    def __post_init__(self) -> None:
        from ..scoring.official import PROTOCOLS

        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; known: {', '.join(PROTOCOLS)}")
        if self.parity != "exact" and not self.note:
            raise ValueError(f"parity {self.parity!r} needs a note saying why")


@dataclass(frozen=True)
class Card:
    id: str
    name: str
    sources: Sources
    task_types: tuple[str, ...]
    prompt: Mapping[str, str]  # task type -> template name; key "default" for the rest
    metric: str
    description: str = ""
    aggregation: Aggregation = field(default_factory=Aggregation)
    categories: tuple[Category, ...] = ()
    frames: FrameSettings = field(default_factory=FrameSettings)
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> its YAML (read by read_preset)
    suites: tuple[str, ...] = ()
    path_fields: Mapping[str, str] = field(default_factory=dict)  # field -> regex over the video path (group 1)
    quirks: tuple[str, ...] = ()  # named sample hooks in quirks.py
    homepage: str | None = None
    preset: str | None = None  # set on a card derived from a preset
    file: Path | None = None
    official: Official | None = None  # None only for the synthetic demo cards (their truth is exact by design)

    def __post_init__(self) -> None:
        if not ID_RE.match(self.base_id):
            raise ValueError(f"id {self.id!r} must be lowercase letters, digits, '-' or '_'")
        for key in ("task_types", "suites", "quirks"):
            _non_empty(key, getattr(self, key))
        if self.frames.side is not None:
            raise ValueError("frames.side cannot be set: a fixed-size family's checkpoint decides it")
        for name, regex in self.path_fields.items():
            try:
                groups = re.compile(regex).groups
            except re.error as exc:
                raise ValueError(f"path_fields.{name} is not a valid regex: {exc}") from None
            if groups < 1:
                raise ValueError(f"path_fields.{name} needs one capture group")

    @property
    def synthetic(self) -> bool:
        """A built-in synthetic benchmark (demo-*, seeing-*): generated videos, no official release or scorer."""
        return self.sources.demo is not None

    @property
    def base_id(self) -> str:
        return self.id.split("@", 1)[0]

    def template_for(self, task_type: str, canonical: str | None = None) -> str:
        """The template of a task type (`template_of`)."""
        found = template_of(self.prompt, task_type, canonical)
        if found is None:  # a record's problem, not the user's: the run records it as that sample's failure
            raise SampleError(FailureKind.TASK_TYPE_MISMATCH,
                              f"benchmark {self.id!r} has no prompt template for task type {task_type!r}")
        return found


def template_of(prompt: Mapping[str, str], task_type: str, canonical: str | None = None) -> str | None:
    """The template a task type -> template mapping gives a task type: by its spelling in the records, then its
    canonical name, then the default; None when none applies."""
    for key in (task_type, canonical, DEFAULT_PROMPT_KEY):
        if key is not None and key in prompt:
            return prompt[key]
    return None


@dataclass(frozen=True)
class Preset:
    """A preset's keys besides its frame settings (the flat FRAME_KEYS next to them, read by FrameSettings)."""

    description: str | None = None
    task_types: tuple[str, ...] | None = None
    sources: Mapping[str, Any] | None = None  # merged over the card's YAML `sources`, then read like them


# ----------------------------------------------------------------------------------------------- parsing


def _edit(data: Any, key: str, change: Callable[[Any], Any]) -> Any:
    """`data` with `change` applied to its value at `key`, when it is a mapping holding the key; else as it is (what
    is not a mapping, from_json refuses with the key path)."""
    return {**data, key: change(data[key])} if isinstance(data, Mapping) and key in data else data


def _text(expand: Callable[[str], Any]) -> Callable[[Any], Any]:
    """A shorthand's expansion: a string becomes `expand(string)`, anything else stays."""
    return lambda value: expand(value) if isinstance(value, str) else value


def _each(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`change` applied to each item of a list (a shorthand allowed per item)."""
    return lambda value: [change(v) for v in value] if isinstance(value, list) else value


_ONE = _text(lambda s: [s])  # one string where a list of strings goes


def _category(item: Any) -> Any:
    """A category field `f` is {field: f, name: f}; labels are keyed and named by text (YAML reads `0:` as a number)."""
    if isinstance(item, str):
        return {"field": item, "name": item}
    if isinstance(item, Mapping) and "field" in item:
        item = {"name": item["field"], **item}
        return _edit(item, "labels", lambda m: {str(k): str(v) for k, v in m.items()} if isinstance(m, Mapping) else m)
    return item


def _sources_written_out(sources: Any) -> Any:
    """`sources` with the hub's shorthands written out: a file glob `g` is {glob: g}, one video_files string a list."""
    return _edit(sources, "hub", lambda hub: _edit(_edit(hub, "video_files", _ONE), "files",
                                                   _each(_text(lambda g: {"glob": g}))))


def _aggregation(where: str) -> Callable[[Any], Any]:
    """`aggregation: kind` is {kind: kind}; a mapping names its kind (a card never gets micro by leaving it out)."""
    def change(value: Any) -> Any:
        if isinstance(value, Mapping) and "kind" not in value:
            raise UserError(f"{where}: aggregation needs a 'kind'")
        return {"kind": value} if isinstance(value, str) else value
    return change


def _written_out(data: Any, where: str) -> Any:
    """A card's YAML with its shorthands written out as the dataclasses declare them: `prompt: name` is {default:
    name}, one string of task_types/suites/quirks a one-item list, categories and the hub as `_category` and
    `_sources_written_out` say. Everything else is read as written."""
    changes: dict[str, Callable[[Any], Any]] = {
        "prompt": _text(lambda s: {DEFAULT_PROMPT_KEY: s}), "aggregation": _aggregation(where), "task_types": _ONE,
        "suites": _ONE, "quirks": _ONE, "categories": _each(_category), "sources": _sources_written_out}
    for key, change in changes.items():
        data = _edit(data, key, change)
    return data


def read_preset(data: Any, where: str) -> tuple[Preset, FrameSettings]:
    """A preset's own keys and its frame settings: every key that is not the Preset's is a frame key, so a misspelt
    one is refused with the frame key it is closest to (and `side`, the checkpoint's, as not settable here)."""
    if not isinstance(data, Mapping):
        raise UserError(f"{where} must be a mapping, not {type(data).__name__}")
    own = {f.name for f in dataclasses.fields(Preset)}
    frames = from_json(FrameSettings, {k: v for k, v in data.items() if k not in own}, where, exclude=("side",))
    return from_json(Preset, _edit({k: v for k, v in data.items() if k in own}, "task_types", _ONE), where), frames


def preset_frames(preset: Mapping[str, Any], where: str) -> FrameSettings:
    """The frame settings a preset sets (over its card's)."""
    return read_preset(preset, where)[1]


def parse_card(data: Any, file: Path | None = None) -> Card:
    where = str(file) if file else "card"
    card = from_json(Card, _written_out(data, where), where, exclude=("file", "preset"))
    for name, preset in card.presets.items():
        if not PRESET_RE.match(name):
            raise UserError(f"{where}: preset name {name!r} must be letters, digits, '.', '-' or '_'")
        read_preset(preset, f"{where}.presets.{name}")
    return replace(card, file=file) if file else card


def load_card_and_data(path: Path) -> tuple[Card, Any]:
    """The card and the YAML data it was parsed from (a copy: presets merge over it), the file read and parsed once
    (parsing every card's YAML twice cost each plan and run a seventh of a second)."""
    try:
        data = yaml_bounded.load(path.read_text(encoding="utf-8"))  # no alias, bounded depth
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {exc}") from exc
    return parse_card(copy.deepcopy(data), path), data


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge; an empty mapping in `override` clears the key (mmvu@all drops the hub's MC-only filter)."""
    out = dict(base)
    for key, value in override.items():
        nested = isinstance(value, Mapping) and value and isinstance(out.get(key), Mapping)
        out[key] = _merge(out[key], value) if nested else value
    return out


def apply_preset(card: Card, preset: str, raw: Mapping[str, Any]) -> Card:
    """The card of `<id>@<preset>`: frame settings merged, sources/task types replaced where the preset says so.

    `raw` is the card's YAML mapping, so source overrides are parsed exactly like the card's own sources.
    """
    if preset not in card.presets:
        known = ", ".join(sorted(card.presets)) or "none"
        raise UserError(f"benchmark {card.id!r} has no preset {preset!r}; its presets: {known}")
    where = f"{card.file or card.id}: preset {preset}"
    own, frames = read_preset(card.presets[preset], where)
    sources = card.sources
    if own.sources is not None:
        sources = from_json(Sources, _sources_written_out(_merge(raw["sources"], own.sources)), f"{where}.sources")
    return replace(
        card,
        id=f"{card.id}@{preset}",
        description=card.description if own.description is None else own.description,
        sources=sources,
        task_types=card.task_types if own.task_types is None else own.task_types,
        frames=frames.over(card.frames),
        preset=preset,
        suites=(),
    )
