"""Inspect and tidy a cache directory on its own (no videos, no specs needed): stats, verify, gc, compact.

Each is safe beside runs using the same cache: an entry that disappears (another gc, an eviction) is skipped, not
reported; a folder that a writer fills again is left; only the very file found corrupt is removed
(store.discard_entry), never a good entry renamed into place meanwhile; compact checks its rewrite in memory, so
it never reads back someone else's file."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .codecs import DEFAULT_CODEC, CodecError, check_codec
from .disk_budget import entry_size
from .entry_file import (
    CorruptEntry,
    EntryMissing,
    UnverifiedEntry,
    discard_entry,
    load_entry,
    read_header,
    write_entry,
)
from .keys import read_record
from .labels import UNLABELLED, keys_by_benchmark
from .layout import CacheLayout, FailureRecord


@dataclass
class CacheStats:
    root: str
    entries: int = 0
    bytes: int = 0
    frames: int = 0
    failures: int = 0
    failures_by_kind: dict[str, int] = field(default_factory=dict)
    temp_files: int = 0
    unreadable: int = 0  # entries whose header does not parse (verify says why)
    decoders: dict[str, int] = field(default_factory=dict)
    raw_bytes: int = 0  # what the readable entries' frames take as uint8
    codecs: dict[str, int] = field(default_factory=dict)
    by_benchmark: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (entries, bytes) present now

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.failures_by_kind.items())) or "none"
        decoders = ", ".join(f"{k} {n}" for k, n in sorted(self.decoders.items())) or "none"
        codecs = ", ".join(f"{k} {n}" for k, n in sorted(self.codecs.items())) or "none"
        ratio = f", {self.bytes / self.raw_bytes:.2f}x of raw uint8" if self.raw_bytes else ""
        out = [
            f"cache        {self.root}",
            f"entries      {self.entries} ({self.bytes / 1e6:.1f} MB, {self.frames} frames{ratio})",
            f"codecs       {codecs}",
            f"decoders     {decoders}",
            f"failures     {self.failures} ({kinds})",
            f"unreadable   {self.unreadable}",
            f"temp files   {self.temp_files}",
        ]
        if self.by_benchmark:
            out.append("by benchmark (an entry shared by several benchmarks counts in each):")
            width = max(len(b) for b in self.by_benchmark)
            for bench, (n, size) in sorted(self.by_benchmark.items(), key=lambda kv: (kv[0] == UNLABELLED, kv[0])):
                out.append(f"  {bench:<{width}}  {n:>6} entries  {size / 1e6:>10.1f} MB")
        return out


def cache_stats(root: Path) -> CacheStats:
    layout = CacheLayout(Path(root))
    stats = CacheStats(root=str(root))
    decoders: Counter[str] = Counter()
    codecs: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    for path in layout.entries():
        stats.entries += 1
        sizes[path.stem] = entry_size(path)
        stats.bytes += sizes[path.stem]
        try:
            header = read_header(path, path.stem)
        except EntryMissing:
            continue
        except CorruptEntry:
            stats.unreadable += 1
            continue
        stats.frames += header.shape[0]
        stats.raw_bytes += header.raw_bytes
        decoders[header.meta.decoder] += 1
        codecs[header.codec] += 1
    labelled: set[str] = set()
    for bench, keys in keys_by_benchmark(layout).items():
        present = keys & sizes.keys()
        labelled |= present
        if present:
            stats.by_benchmark[bench] = (len(present), sum(sizes[k] for k in present))
    rest = sizes.keys() - labelled
    if rest and stats.by_benchmark:
        stats.by_benchmark[UNLABELLED] = (len(rest), sum(sizes[k] for k in rest))
    stats.codecs = dict(codecs)
    kinds: Counter[str] = Counter()
    for path in layout.failures():
        record = FailureRecord.read(path)
        kinds[record.kind if record else "unreadable"] += 1
    stats.failures = sum(kinds.values())
    stats.failures_by_kind = dict(kinds)
    stats.decoders = dict(decoders)
    stats.temp_files = sum(1 for _ in layout.temp_files())
    return stats


@dataclass
class VerifyReport:
    checked: int = 0
    corrupt: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    removed: int = 0
    unverified: int = 0  # of the corrupt: an earlier version's entries (no checksum), rebuilt on next use


def verify_cache(root: Path, remove: bool = False, deep: bool = True) -> VerifyReport:
    """Check every entry: its header checksum, that it is bound to the key it is filed under, and (deep) every
    frame byte against the payload checksum, else only the header and file size. Optionally delete bad ones."""
    report = VerifyReport()
    for path in CacheLayout(Path(root)).entries():
        try:
            if not path.stem.startswith(path.parent.name):
                raise CorruptEntry("misplaced: the file name does not match its shard directory")
            load_entry(path, path.stem) if deep else read_header(path, path.stem)
        except EntryMissing:
            continue  # removed meanwhile (gc, a run's budget): nothing to check
        except CorruptEntry as exc:
            report.corrupt.append((str(path), str(exc)))
            report.unverified += isinstance(exc, UnverifiedEntry)
            if remove:
                discard_entry(path, exc.stat)
                report.removed += 1
        report.checked += 1
    for path in CacheLayout(Path(root)).fingerprint_records():  # what maps a video to its entries' keys
        if read_record(path) is None:
            report.corrupt.append((str(path), "fingerprint record unreadable, not a regular file, or its checksum "
                                              "does not match (an edited digest would map a video to another's "
                                              "frames); it is never used, and the video is hashed again"))
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink()
                report.removed += 1
    return report


@dataclass
class GcReport:
    entries: int = 0
    bytes: int = 0
    failures: int = 0
    temp_files: int = 0


def gc_cache(
    root: Path,
    *,
    older_than_days: float | None = None,
    max_bytes: int | None = None,
    failures: bool = False,
    temp_age_s: float = 3600.0,
    dry_run: bool = False,
    now: float | None = None,
) -> GcReport:
    """Remove leftovers of interrupted writes, entries unused for a while (or the least recently used beyond a size
    cap), and, on request, failure records (so those videos are tried again)."""
    layout = CacheLayout(Path(root))
    now = time.time() if now is None else now
    report = GcReport()

    def drop(path: Path) -> None:
        if not dry_run:
            path.unlink(missing_ok=True)

    for path in layout.temp_files():
        if now - _mtime(path) > temp_age_s:  # young ones may still be being written
            report.temp_files += 1
            drop(path)
    entries = sorted(((_mtime(p), entry_size(p), p) for p in layout.entries()), key=lambda t: t[0])  # oldest first
    keep_bytes = sum(size for _, size, _ in entries)
    for used, size, path in entries:
        too_old = older_than_days is not None and now - used > older_than_days * 86400
        too_big = max_bytes is not None and keep_bytes > max_bytes
        if too_old or too_big:
            report.entries += 1
            report.bytes += size
            keep_bytes -= size
            drop(path)
    if failures:
        for path in layout.failures():
            report.failures += 1
            drop(path)
    if not dry_run:
        for shard in (layout.base / "entries").glob("*"):
            try:
                shard.rmdir()  # only ever removes an empty folder; the writer makes it again if it needs it
            except OSError:
                pass  # not empty (a writer got there first), already gone, or not a folder
    return report


@dataclass
class CompactReport:
    rewritten: int = 0
    kept: int = 0  # already in the target codec
    corrupt: int = 0  # unreadable: removed, so they are rebuilt on next use
    bytes_before: int = 0
    bytes_after: int = 0


def compact_cache(root: Path, codec: str = DEFAULT_CODEC, dry_run: bool = False) -> CompactReport:
    """Rewrite every entry not stored with `codec` (e.g. raw entries written on a run's critical path) in place: same
    key, same frames (the encoding is decoded and compared in memory before the rename), atomic replace, so a run
    reading the cache meanwhile is unaffected. Entries of an earlier version (no checksum) are removed, like
    corrupt ones: nothing vouches for their frames, so they are decoded again on next use."""
    check_codec(codec)
    report = CompactReport()
    for path in CacheLayout(Path(root)).entries():
        compact_entry(path, codec, report, dry_run)
    return report


def compact_entry(path: Path, codec: str, report: CompactReport | None = None, dry_run: bool = False) -> None:
    """Rewrite one entry with `codec` unless it already is (see `compact_cache`); counts into `report`."""
    report = report if report is not None else CompactReport()
    try:
        if read_header(path, path.stem).codec == codec:
            report.kept += 1
            return
        frames, header = load_entry(path, path.stem)
    except EntryMissing:
        return
    except CorruptEntry as exc:
        report.corrupt += 1
        if not dry_run:
            discard_entry(path, exc.stat)
        return
    report.bytes_before += entry_size(path)
    if dry_run:
        report.rewritten += 1
        return
    try:
        report.bytes_after += write_entry(path, frames, header.meta, codec, video=header.binding.video,
                                          key=header.key, check=True)
    except CodecError as exc:  # never expected: a codec bug must not pass silently (the entry is left as it was)
        raise RuntimeError(f"{codec} did not give back the frames of {path}; the entry was kept as it was") from exc
    report.rewritten += 1


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
