"""Inspect and tidy a cache directory on its own (no videos, no specs needed): stats, verify, gc."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .layout import CacheLayout, FailureRecord
from .store import CorruptEntry, discard_entry, read_entry, read_header


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

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.failures_by_kind.items())) or "none"
        decoders = ", ".join(f"{k} {n}" for k, n in sorted(self.decoders.items())) or "none"
        return [
            f"cache        {self.root}",
            f"entries      {self.entries} ({self.bytes / 1e6:.1f} MB, {self.frames} frames)",
            f"decoders     {decoders}",
            f"failures     {self.failures} ({kinds})",
            f"unreadable   {self.unreadable}",
            f"temp files   {self.temp_files}",
        ]


def cache_stats(root: Path) -> CacheStats:
    layout = CacheLayout(Path(root))
    stats = CacheStats(root=str(root))
    decoders: Counter[str] = Counter()
    for path in layout.entries():
        stats.entries += 1
        stats.bytes += _size(path)
        try:
            meta, shape, _ = read_header(path)
        except CorruptEntry:
            stats.unreadable += 1
            continue
        stats.frames += shape[0]
        decoders[meta.decoder] += 1
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


def verify_cache(root: Path, remove: bool = False, deep: bool = True) -> VerifyReport:
    """Check every entry (deep: read all frame bytes, else the header and file size); optionally delete bad ones."""
    report = VerifyReport()
    for path in CacheLayout(Path(root)).entries():
        report.checked += 1
        try:
            if not path.stem.startswith(path.parent.name):
                raise CorruptEntry("misplaced: the file name does not match its shard directory")
            read_entry(path) if deep else read_header(path)
        except CorruptEntry as exc:
            report.corrupt.append((str(path), str(exc)))
            if remove:
                discard_entry(path)
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
    entries = sorted(((_mtime(p), _size(p), p) for p in layout.entries()), key=lambda t: t[0])  # oldest first
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
            if shard.is_dir() and not any(shard.iterdir()):
                shard.rmdir()
    return report


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
