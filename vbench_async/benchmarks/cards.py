"""Benchmark cards: the YAML files in the top-level `benchmarks/` folder, parsed into frozen dataclasses.

A card is data: where the annotations and videos are (sources), which task types it holds, which prompt template
each task type uses, the metric and official aggregation, the category fields to break scores down by, the default
frame settings and named presets. Parsing is strict: an unknown key or a wrong type is a `UserError` naming the file,
so a typo in a card never silently changes a score.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import yaml

from .. import yaml_bounded
from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..frames.frame_settings import FIELDS as FRAME_FIELDS
from ..frames.frame_settings import FrameSettings
from ..settings import from_json

ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
PRESET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Frame settings a card or preset may set: FrameSettings' fields, with their bounds, but the frame side of a
# fixed-size family, which its checkpoint decides (a card's would always be overruled).
FRAME_KEYS = frozenset(FRAME_FIELDS) - {"side"}
DEFAULT_PROMPT_KEY = "default"


@dataclass(frozen=True)
class ClipFallback:
    """Pre-cut clip files named after their source video and time range (LiveSports, ODV-Bench).

    When a clip file is missing but its source video exists, the sample reads the source video with the clip's
    (start, end) window instead, so users need not run a trimming step (stream-copy trimming also snaps to keyframes).
    """

    pattern: str  # regex over the clip file name with groups `source`, `start`, `end`
    source_dir: str  # folder of the full videos, relative to the data root (or absolute)
    search: bool = False  # find the source by file stem anywhere below source_dir (ODV-Bench layout)


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
    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HubSource:
    """The official release on the Hugging Face hub: which files to fetch and how a record maps to a Sample."""

    repo: str
    files: tuple[HubFile, ...]
    record: Mapping[str, Any]  # field mapping, see hub.py
    video_dir: str = "."  # relative to the snapshot folder
    revision: str | None = None
    video_files: tuple[str, ...] = ()  # archives fetched with `data fetch --with-videos`
    video_revision: str | None = None  # MVBench keeps its videos on another branch
    hook: str | None = None  # a named converter in quirks.py for releases no mapping can express
    limit: int | None = None  # keep only the first N records (ST-Align evaluates the first 2,000)
    note: str = ""  # printed by `data fetch`: unpacking steps, gated access, files that live elsewhere


@dataclass(frozen=True)
class Sources:
    unified: UnifiedSource | None = None
    hub: HubSource | None = None
    demo: str | None = None  # group name inside the generated synthetic suite


@dataclass(frozen=True)
class Category:
    """A breakdown of scores by a record field: `by_<name>` in the aggregate."""

    name: str
    field: str
    labels: Mapping[str, str] | None = None  # raw value (as text) -> display label
    bins: tuple[float, ...] | None = None  # numeric field cut into buckets at these edges


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
    parity: str  # one of PARITY_STATUSES
    note: str = ""


@dataclass(frozen=True)
class Card:
    id: str
    name: str
    description: str
    sources: Sources
    task_types: tuple[str, ...]
    prompt: Mapping[str, str]  # task type -> template name; key "default" for the rest
    metric: str
    aggregation: Aggregation
    categories: tuple[Category, ...] = ()
    frames: FrameSettings = field(default_factory=FrameSettings)
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    suites: tuple[str, ...] = ()
    path_fields: Mapping[str, str] = field(default_factory=dict)  # field -> regex over the video path (group 1)
    quirks: tuple[str, ...] = ()  # named sample hooks in quirks.py
    homepage: str | None = None
    preset: str | None = None  # set on a card derived from a preset
    file: Path | None = None
    official: Official | None = None  # None only for the synthetic demo cards (their truth is exact by design)

    @property
    def synthetic(self) -> bool:
        """A built-in synthetic benchmark (demo-*, seeing-*): generated videos, no official release or scorer."""
        return self.sources.demo is not None

    @property
    def base_id(self) -> str:
        return self.id.split("@", 1)[0]

    def template_for(self, task_type: str, canonical: str | None = None) -> str:
        """The template of a task type: by its spelling in the records, then its canonical name, then default."""
        for key in (task_type, canonical, DEFAULT_PROMPT_KEY):
            if key is not None and key in self.prompt:
                return self.prompt[key]
        # A record's problem, not the user's: the run records it as that sample's failure and goes on.
        raise SampleError(FailureKind.TASK_TYPE_MISMATCH,
                          f"benchmark {self.id!r} has no prompt template for task type {task_type!r}")


# ----------------------------------------------------------------------------------------------- parsing helpers


class _Reader:
    """Typed access to one mapping of a card, with errors that name the file and the key path."""

    def __init__(self, data: Any, where: str, allowed: set[str]):
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: expected a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; "
                            f"allowed: {', '.join(sorted(allowed))}")
        self.data, self.where = data, where

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, required: bool = False) -> Any:
        if key not in self.data or self.data[key] is None:
            if required:
                raise UserError(f"{self.where}: missing required key {key!r}")
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise UserError(f"{self.where}: {key} must be a {names}, got {value!r}")
        return value

    def strings(self, key: str, required: bool = False) -> tuple[str, ...]:
        value = self.get(key, (list, str), [], required)
        items = [value] if isinstance(value, str) else value
        if not all(isinstance(v, str) and v for v in items):
            raise UserError(f"{self.where}: {key} must be a list of non-empty strings")
        return tuple(items)


def _clip_fallback(data: Any, where: str) -> ClipFallback:
    r = _Reader(data, where, {"pattern", "source_dir", "search"})
    pattern = r.get("pattern", str, required=True)
    try:
        groups = set(re.compile(pattern).groupindex)
    except re.error as exc:
        raise UserError(f"{where}: pattern is not a valid regex: {exc}") from exc
    if not {"source", "start", "end"} <= groups:
        raise UserError(f"{where}: pattern needs named groups source, start and end")
    return ClipFallback(pattern, r.get("source_dir", str, required=True), r.get("search", bool, False))


def _unified(data: Any, where: str) -> UnifiedSource:
    r = _Reader(data, where, {"annotation", "video_dir", "image_dir", "clip_fallback"})
    clip = r.get("clip_fallback", Mapping)
    return UnifiedSource(
        annotation=r.get("annotation", str, required=True),
        video_dir=r.get("video_dir", str, required=True),
        image_dir=r.get("image_dir", str),
        clip_fallback=_clip_fallback(clip, f"{where}.clip_fallback") if clip is not None else None,
    )


_RECORD_KEYS = {
    "id", "question", "options", "answer", "video", "video_ext", "video_search", "task_type", "start", "end", "image",
    "fields", "vars", "explode", "filter", "exclude", "records",
}
_OPTION_KINDS = {"list", "dict", "columns", "embedded"}
_ANSWER_KINDS = {"letter", "index", "raw", "time_span"}


def _record_mapping(data: Any, where: str) -> dict[str, Any]:
    """Check a hub record mapping's shape here, so a card typo fails at load time and not on the first record."""
    r = _Reader(data, where, _RECORD_KEYS)
    for key in ("options", "answer"):
        spec = r.get(key, (str, Mapping))
        if isinstance(spec, Mapping):
            kinds = _OPTION_KINDS if key == "options" else _ANSWER_KINDS
            sr = _Reader(spec, f"{where}.{key}", {"field", "kind", "columns", "sep", "if_null"})
            if sr.get("kind", str, "list" if key == "options" else "letter") not in kinds:
                raise UserError(f"{where}.{key}: kind must be one of {', '.join(sorted(kinds))}")
            if spec.get("kind") == "columns" and not isinstance(spec.get("columns"), list):
                raise UserError(f"{where}.{key}: kind columns needs a 'columns' list")
            if spec.get("kind") not in ("columns", "embedded") and not isinstance(spec.get("field"), str):
                raise UserError(f"{where}.{key}: needs a 'field'")
    for name, var in (r.get("vars", Mapping, {})).items():
        vr = _Reader(var, f"{where}.vars.{name}", {"from", "map", "default"})
        vr.get("from", str, required=True)
        vr.get("map", Mapping, required=True)
    for key in ("fields", "filter", "exclude"):
        r.get(key, Mapping)
    if r.get("records", str) not in (None, "dict_by_id"):
        raise UserError(f"{where}.records: the only special layout is dict_by_id")
    return dict(data)


def _hub(data: Any, where: str) -> HubSource:
    r = _Reader(data, where, {"repo", "files", "record", "video_dir", "revision", "video_files", "video_revision",
                              "hook", "limit", "note"})
    files = []
    for i, entry in enumerate(r.get("files", list, required=True)):
        if isinstance(entry, str):
            files.append(HubFile(entry))
            continue
        fr = _Reader(entry, f"{where}.files[{i}]", {"glob", "record"})
        override = _record_mapping(fr.get("record", Mapping, {}), f"{where}.files[{i}].record")
        files.append(HubFile(fr.get("glob", str, required=True), override))
    if not files:
        raise UserError(f"{where}: files must list at least one annotation file glob")
    hook = r.get("hook", str)
    record = _record_mapping(r.get("record", Mapping, {}), f"{where}.record")
    if hook is None and not record:
        raise UserError(f"{where}: give a record mapping or a hook")
    repo = r.get("repo", str, required=True)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise UserError(f"{where}: repo must look like owner/name, got {repo!r}")
    return HubSource(
        repo=repo,
        files=tuple(files),
        record=record,
        video_dir=r.get("video_dir", str, "."),
        revision=r.get("revision", str),
        video_files=r.strings("video_files"),
        video_revision=r.get("video_revision", str),
        hook=hook,
        limit=r.get("limit", int),
        note=r.get("note", str, ""),
    )


def _sources(data: Any, where: str) -> Sources:
    r = _Reader(data, where, {"unified", "hub", "demo"})
    unified, hub = r.get("unified", Mapping), r.get("hub", Mapping)
    sources = Sources(
        unified=_unified(unified, f"{where}.unified") if unified is not None else None,
        hub=_hub(hub, f"{where}.hub") if hub is not None else None,
        demo=r.get("demo", str),
    )
    if not (sources.unified or sources.hub or sources.demo):
        raise UserError(f"{where}: a card needs at least one source (unified, hub or demo)")
    return sources


def _categories(items: Any, where: str) -> tuple[Category, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise UserError(f"{where}: must be a list")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append(Category(item, item))
            continue
        r = _Reader(item, f"{where}[{i}]", {"field", "name", "labels", "bins"})
        name_field = r.get("field", str, required=True)
        labels = r.get("labels", Mapping)
        bins = r.get("bins", list)
        if bins is not None and not all(isinstance(b, (int, float)) for b in bins):
            raise UserError(f"{where}[{i}]: bins must be numbers")
        out.append(Category(
            name=r.get("name", str, name_field),
            field=name_field,
            labels={str(k).lower(): str(v) for k, v in labels.items()} if labels else None,
            bins=tuple(sorted(float(b) for b in bins)) if bins else None,
        ))
    return tuple(out)


def _frames(data: Any, where: str) -> FrameSettings:
    """A card's or preset's frame settings: the keys a card may set, read with FrameSettings' types and bounds (the
    flags' and jobs')."""
    if data is None:
        return FrameSettings()
    return FrameSettings.read(_Reader(data, where, set(FRAME_KEYS)).data, where)


def _prompt(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {DEFAULT_PROMPT_KEY: value}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise UserError(f"{where}: prompt must be a template name or a mapping task type -> template name")
    return {str(k): v for k, v in value.items()}


def _official(data: Any, where: str) -> Official | None:
    if data is None:
        return None
    from ..scoring.official import PROTOCOLS

    r = _Reader(data, where, {"protocol", "source", "parity", "note"})
    protocol = r.get("protocol", str, required=True)
    if protocol not in PROTOCOLS:
        raise UserError(f"{where}: unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    parity = r.get("parity", str, required=True)
    if parity not in PARITY_STATUSES:
        raise UserError(f"{where}: parity must be one of: {'; '.join(PARITY_STATUSES)}")
    note = r.get("note", str, "")
    if parity != "exact" and not note:
        raise UserError(f"{where}: parity {parity!r} needs a note saying why")
    return Official(protocol, r.get("source", str, required=True), parity, note)


_CARD_KEYS = {
    "id", "name", "description", "homepage", "sources", "task_types", "prompt", "metric", "aggregation",
    "categories", "frames", "presets", "suites", "path_fields", "quirks", "official",
}
_PRESET_KEYS = set(FRAME_KEYS) | {"sources", "task_types", "description"}


def parse_card(data: Any, file: Path | None = None) -> Card:
    where = str(file) if file else "card"
    r = _Reader(data, where, _CARD_KEYS)
    card_id = r.get("id", str, required=True)
    if not ID_RE.match(card_id):
        raise UserError(f"{where}: id {card_id!r} must be lowercase letters, digits, '-' or '_'")
    task_types = r.strings("task_types", required=True)
    agg = r.get("aggregation", (Mapping, str), {"kind": "micro"})
    agg = {"kind": agg} if isinstance(agg, str) else dict(agg)
    if not isinstance(agg.get("kind"), str):
        raise UserError(f"{where}: aggregation needs a 'kind'")
    aggregation = from_json(Aggregation, agg, f"{where}.aggregation")
    presets = r.get("presets", Mapping, {})
    for name, preset in presets.items():
        if not isinstance(name, str) or not PRESET_RE.match(name):
            raise UserError(f"{where}: preset name {name!r} must be letters, digits, '.', '-' or '_'")
        _Reader(preset, f"{where}.presets.{name}", _PRESET_KEYS)
        preset_frames(preset, f"{where}.presets.{name}")
    path_fields = r.get("path_fields", Mapping, {})
    for key, regex in path_fields.items():
        try:
            if re.compile(regex).groups < 1:
                raise UserError(f"{where}: path_fields.{key} needs one capture group")
        except (re.error, TypeError) as exc:
            raise UserError(f"{where}: path_fields.{key} is not a valid regex: {exc}") from exc
    return Card(
        id=card_id,
        name=r.get("name", str, required=True),
        description=r.get("description", str, ""),
        homepage=r.get("homepage", str),
        sources=_sources(r.get("sources", Mapping, required=True), f"{where}.sources"),
        task_types=task_types,
        prompt=_prompt(r.get("prompt", (str, Mapping), required=True), f"{where}.prompt"),
        metric=r.get("metric", str, required=True),
        aggregation=aggregation,
        categories=_categories(r.get("categories", list), f"{where}.categories"),
        frames=_frames(r.get("frames", Mapping), f"{where}.frames"),
        presets={k: dict(v) for k, v in presets.items()},
        suites=r.strings("suites"),
        path_fields=dict(path_fields),
        quirks=r.strings("quirks"),
        file=file,
        official=_official(r.get("official", Mapping), f"{where}.official"),
    )


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
    settings = card.presets[preset]
    where = f"{card.file or card.id}: preset {preset}"
    sources = card.sources
    if "sources" in settings:
        sources = _sources(_merge(raw.get("sources", {}), settings["sources"]), f"{where}.sources")
    task_types = card.task_types
    if "task_types" in settings:
        task_types = _Reader(settings, where, _PRESET_KEYS).strings("task_types")
    return replace(
        card,
        id=f"{card.id}@{preset}",
        description=settings.get("description", card.description),
        sources=sources,
        task_types=task_types,
        frames=preset_frames(settings, where).over(card.frames),
        preset=preset,
        suites=(),
    )


def preset_frames(preset: Mapping[str, Any], where: str) -> FrameSettings:
    """The frame settings a preset sets (over its card's)."""
    return _frames({k: v for k, v in preset.items() if k in FRAME_KEYS}, where)
