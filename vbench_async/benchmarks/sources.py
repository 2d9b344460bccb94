"""Where a benchmark's annotations and videos are, and loading them into Samples, from any of the three sources.

- unified: the predecessor's JSON/JSONL file and video folder under the data root (what a migrating user has);
- hub: a local snapshot of the official release, `<data root>/hub/<owner>/<name>` (see `data fetch`);
- demo: the generated synthetic suite, treated as a unified source rooted in its folder.

The data root is `--data-root`, else $VBENCH_DATA_ROOT, else ./data. It may also be a YAML file mapping benchmarks
to folders, for data spread over several disks:

    root: /data                      # optional; relative paths below are relative to it (default: the file's folder)
    benchmarks:
      videomme: {annotation: /ssd/videomme.json, video_dir: /hdd/Video-MME}
      mvbench: {hub_dir: /mnt/hf/MVBench}
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import yaml

from .. import yaml_bounded
from ..errors import DataMissing, SampleError, UserError
from ..failure_kinds import FailureKind
from ..samples import Sample, iter_records, sample_from
from ..settings import from_json
from .cards import Card
from .quirks import SAMPLE_HOOKS, ClipResolver, add_path_fields, dedupe_ids

DATA_ROOT_ENV = "VBENCH_DATA_ROOT"
SOURCE_KINDS = ("auto", "unified", "hub", "demo")


@dataclass(frozen=True)
class DataOverride:
    """Where one benchmark's files are when not where its card says: relative to the map's root, or absolute."""

    annotation: str | None = None
    video_dir: str | None = None
    image_dir: str | None = None
    hub_dir: str | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))


@dataclass(frozen=True)
class DataMap:
    """A data map's YAML (`--data-root map.yaml`): the root the relative paths start from (default: the map's folder)
    and the benchmarks whose files are elsewhere."""

    root: str | None = None
    benchmarks: Mapping[str, DataOverride] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class DataRoot:
    root: Path
    overrides: Mapping[str, DataOverride]

    def override(self, card: Card) -> DataOverride:
        """The map's entry for the card (`id@preset`), else for its base card; an empty one without."""
        for key in (card.id, card.base_id):
            if key in self.overrides:
                return self.overrides[key]
        return DataOverride()

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.root / p


@cache
def _data_map(path: Path) -> DataRoot:
    try:
        data = yaml_bounded.load(path.read_text(encoding="utf-8")) or {}  # no alias, bounded depth
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read data map {path}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise UserError(f"{path}: a data map has the keys 'root' and 'benchmarks' (see README, 'Data maps')")
    read = from_json(DataMap, {k: v for k, v in data.items() if v is not None}, str(path))  # an empty key: unset
    root = Path(read.root or path.parent).expanduser()
    root = root if root.is_absolute() else path.parent / root
    return DataRoot(root.absolute(), {str(k): v for k, v in read.benchmarks.items()})


def data_root(path: Path | str | None) -> DataRoot:
    """Resolve `--data-root`: a folder, a YAML data map, or (None) $VBENCH_DATA_ROOT or ./data."""
    if path is None:
        path = os.environ.get(DATA_ROOT_ENV) or "data"
    path = Path(path).expanduser()
    if path.suffix.lower() in (".yaml", ".yml") and not path.is_dir():
        if not path.is_file():
            raise UserError(f"data map {path} does not exist (--data-root takes a folder or a YAML data map)")
        return _data_map(path.absolute())
    return DataRoot(path.absolute(), {})


def hub_dir(card: Card, root: DataRoot) -> Path:
    """The local snapshot folder of a card's hub release."""
    own = root.override(card).hub_dir
    if own is not None:
        return root.path(own)
    if card.sources.hub is None:
        raise UserError(f"benchmark {card.id!r} has no hub source")
    owner, name = card.sources.hub.repo.split("/")
    return root.root / "hub" / owner / name


@dataclass(frozen=True)
class Resolved:
    """One benchmark's files under one data root, for one source kind."""

    kind: str
    video_root: Path
    image_root: Path
    annotation: Path | None = None  # unified and demo
    snapshot: Path | None = None  # hub
    clip_root: Path | None = None  # full videos for missing pre-cut clips


def _demo_suite(group: str) -> tuple[Callable[[], Path], Callable[[], Path], str]:
    """(where the suite is, the function that generates it on first use, annotation group) of a demo source: `GROUP`
    (the demo suite) or `seeing/GROUP` (the seeing suite)."""
    try:
        from ..demo import seeing_suite, suite
    except ImportError as exc:
        raise UserError(f"the demo suite generator is not available: {exc}") from exc
    name, _, group = group.rpartition("/")
    if name == "seeing":
        return seeing_suite.seeing_suite_dir, seeing_suite.ensure_seeing_suite, group
    return suite.demo_suite_dir, suite.ensure_demo_suite, group


def demo_built(group: str) -> bool:
    """Whether a demo source's suite has been generated (its folder appears, by a rename, only once complete)."""
    return _demo_suite(group)[0]().is_dir()


def _unified(card: Card, root: DataRoot) -> Resolved:
    src, over = card.sources.unified, root.override(card)
    video_root = root.path(src.video_dir if over.video_dir is None else over.video_dir)
    image_dir = src.image_dir if over.image_dir is None else over.image_dir
    clip = src.clip_fallback
    return Resolved(
        kind="unified",
        annotation=root.path(src.annotation if over.annotation is None else over.annotation),
        video_root=video_root,
        image_root=root.path(image_dir) if image_dir else video_root,
        clip_root=root.path(clip.source_dir) if clip else None,
    )


def _hub(card: Card, root: DataRoot) -> Resolved:
    snapshot = hub_dir(card, root)
    video_root = snapshot / card.sources.hub.video_dir
    return Resolved(kind="hub", snapshot=snapshot, video_root=video_root, image_root=snapshot)


def _hub_present(card: Card, root: DataRoot) -> bool:
    from .hub import annotation_files

    snapshot = hub_dir(card, root)
    return snapshot.is_dir() and bool(annotation_files(snapshot, card.sources.hub))


def resolve(card: Card, data_root_path: Path | str | None, source: str = "auto") -> Resolved:
    """Pick the source: `auto` prefers the demo, then a present unified file, then a present hub snapshot."""
    if source not in SOURCE_KINDS:
        raise UserError(f"unknown source {source!r}; choose from {', '.join(SOURCE_KINDS)}")
    if source in ("auto", "demo") and card.sources.demo:
        if data_root_path is not None and data_root(data_root_path).override(card):
            raise UserError(f"the data map names {card.id!r}, a built-in synthetic benchmark that always reads its "
                            f"generated suite; give other records of it with a training config's data.records, or "
                            f"remove the entry")
        _, ensure, group = _demo_suite(card.sources.demo)
        folder = ensure()
        videos = folder / "videos"
        return Resolved("demo", videos, videos, annotation=folder / "annotations" / f"{group}.json")
    if source == "demo":
        raise UserError(f"benchmark {card.id!r} has no demo source")
    root = data_root(data_root_path)
    if source == "unified" or (source == "auto" and card.sources.unified and not card.sources.hub):
        if card.sources.unified is None:
            raise UserError(f"benchmark {card.id!r} has no unified source; use its hub source")
        return _unified(card, root)
    if source == "hub":
        return _hub(card, root)
    unified = _unified(card, root) if card.sources.unified else None
    if unified and unified.annotation.is_file():
        return unified
    if card.sources.hub and _hub_present(card, root):
        return _hub(card, root)
    return unified or _hub(card, root)  # neither present: the error at load time names what was looked for


def _missing_message(card: Card, resolved: Resolved, root: Path | str | None) -> str:
    wanted = [f"the annotation file {resolved.annotation}"] if resolved.annotation else []
    if card.sources.hub:
        wanted.append(f"a snapshot of {card.sources.hub.repo} in {hub_dir(card, data_root(root))} "
                      f"(`vbench-async data fetch {card.base_id}`)")
    return (f"no annotations for {card.id!r}: expected " + " or ".join(wanted)
            + "; point the data root (or a data map) at them")


def load_records(card: Card, resolved: Resolved, root: Path | str | None) -> Iterable[Any]:
    """Unified-format records (dicts, or SampleErrors for records that could not be mapped). A unified annotation
    file is streamed, record by record; records that need mapping from an official release come as a list."""
    if resolved.kind == "hub":
        from .hub import load_hub_records

        if not (resolved.snapshot and resolved.snapshot.is_dir()):
            raise DataMissing(_missing_message(card, resolved, root))
        return load_hub_records(resolved.snapshot, card.sources.hub, resolved.video_root)
    path = resolved.annotation
    if path is None or not path.is_file():
        raise DataMissing(_missing_message(card, resolved, root))
    hub = card.sources.hub
    # A file in the official release's format is mapped whole; deciding needs at most one pass that usually stops at
    # the first record (a unified file's first record has a problem_type).
    if hub and not hub.hook and not _has_problem_type(path):  # no hook: the hub has a record mapping
        return as_unified(_read(path), card, path.parent / ".vbench-images")
    return _stream(path)


def _read(path: Path) -> list[Any]:
    return list(_stream(path))


def _stream(path: Path) -> Iterator[Any]:
    try:
        yield from iter_records(path)
    except SampleError as exc:  # the file's syntax is broken: a user error, before anything runs
        raise UserError(f"cannot read {path}: {exc}") from exc


def _has_problem_type(path: Path) -> bool:
    return any(isinstance(r, Mapping) and "problem_type" in r for r in _stream(path))


def as_unified(records: list[Any], card: Card, image_store: Path) -> list[Any]:
    """Records as given, or mapped with the card's hub mapping when the file is in the official release's format
    (VCR-Bench's raw meta_info_video.json given as the unified file, as the predecessor's conversion hook allowed)."""
    hub = card.sources.hub
    # Any record with a problem_type makes the file unified: judged by the first record alone, one hand-edited record
    # that lost its problem_type would send every record through the official mapping (and fail them all).
    official = records and not any(isinstance(r, Mapping) and "problem_type" in r for r in records)
    if hub and not hub.hook and official and isinstance(records[0], Mapping):
        return official_to_unified(records, card, image_store)
    return records


def official_to_unified(records: list[Any], card: Card, image_store: Path) -> list[Any]:
    """Map records in the official release's format with the card's hub mapping (a file given as unified)."""
    from .hub import to_unified

    out: list[Any] = []
    for i, rec in enumerate(records):
        try:
            out.append(to_unified({**rec, "_index": i, "_file": "", "_dir": ""}, card.sources.hub.record, image_store))
        except (SampleError, TypeError) as exc:
            err = exc if isinstance(exc, SampleError) else SampleError(FailureKind.RECORD_INVALID, str(exc))
            err.sample_id = f"#{i}"
            out.append(err)
    return out


def _consumed(records: Iterable[Any]) -> Iterator[Any]:
    if isinstance(records, list):
        for i in range(len(records)):
            record, records[i] = records[i], None
            yield record
    else:
        yield from records


def to_samples(records: Iterable[Any], card: Card, resolved: Resolved | None = None) -> list[Sample | SampleError]:
    """Parse records and apply the card's per-sample steps (path fields, hooks, clip fallback, unique ids).

    Consumes `records` (a stream, or a list whose entries are released as they become samples), so the raw dicts
    and the samples of a large file are never all in memory at once."""
    unknown = [q for q in card.quirks if q not in SAMPLE_HOOKS]
    if unknown:
        raise UserError(f"{card.id}: unknown quirk(s) {unknown}; known: {', '.join(sorted(SAMPLE_HOOKS))}")
    clip = None
    if resolved is not None and resolved.clip_root is not None and card.sources.unified.clip_fallback:
        clip = ClipResolver(card.sources.unified.clip_fallback, resolved.video_root, resolved.clip_root)
    out: list[Sample | SampleError] = []
    for i, record in enumerate(_consumed(records)):
        # A record that could not be mapped (a SampleError from the hub mapping) is kept as its own error.
        item = record if isinstance(record, SampleError) else sample_from(record, card.id, i)
        if isinstance(item, Sample):
            item = add_path_fields(item, card.path_fields)
            for name in card.quirks:
                item = SAMPLE_HOOKS[name](item)
            if clip is not None:
                item = clip(item)
        out.append(item)
    return dedupe_ids(out, card.id)
