"""A disk budget for a cache directory, and the planner's question "would this run's frames fit?".

`Budget` evicts least-recently-used entries (last use = the entry's mtime, which every load touches) while a run
goes on, whenever an entry written by this process takes the cache past its budget. Keys that queued requests
still need are pinned and never evicted; when only pinned entries are left the cache runs over its budget by
what those requests hold, and `full()` tells preprocessing to stop warming ahead. The index starts from one scan
of the directory and is rescanned at most every RESCAN_S seconds, so entries written by other processes or
machines sharing the directory are counted too (their pins are not known here: an entry another machine still
needs may go, and that machine decodes it again; results never change).

`check_cache_fit` is what the planner calls before a run (see its docstring).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .codecs import RAW, default_codec
from .entry_file import CorruptEntry, read_header
from .layout import CacheLayout

log = logging.getLogger(__name__)

BUDGET_ENV = "VBENCH_ASYNC_CACHE_MAX_GB"
RESCAN_S = 30.0
# Bytes per raw byte assumed for entries not yet written when the cache holds none of that codec to learn from:
# perf/frames.py measures 0.3-0.45 for zstd on camera-like frames; noisier footage compresses less.
PLANNING_RATIO = {RAW: 1.0, "zstd": 0.6}


def budget_from_env() -> int | None:
    """$VBENCH_ASYNC_CACHE_MAX_GB in bytes, or None (no budget)."""
    value = os.environ.get(BUDGET_ENV)
    if not value:
        return None
    try:
        gb = float(value)
    except ValueError:
        raise ValueError(f"${BUDGET_ENV} must be a number of gigabytes, got {value!r}") from None
    return gb_to_bytes(gb)


def gb_to_bytes(gb: float) -> int:
    if not gb >= 0:
        raise ValueError(f"a cache budget must be a non-negative number of gigabytes, got {gb!r}")
    return int(gb * 1e9)


class Budget:
    def __init__(self, layout: CacheLayout, max_bytes: int):
        self.layout = layout
        self.max_bytes = max_bytes
        self.evicted = 0  # entries this object removed
        self._sizes: dict[str, tuple[int, float]] = {}  # key -> (bytes, last use)
        self._pins: Counter[str] = Counter()
        self._scanned_at: float | None = None
        self._lock = threading.Lock()

    # -- pins -------------------------------------------------------------------------------------------------------
    def pin(self, key: str, count: int = 1) -> None:
        with self._lock:
            self._pins[key] += count

    def unpin(self, key: str) -> None:
        with self._lock:
            if self._pins[key] <= 1:
                self._pins.pop(key, None)
            else:
                self._pins[key] -= 1

    # -- accounting -------------------------------------------------------------------------------------------------
    def used(self, key: str, size: int | None = None) -> None:
        """An entry was loaded or written just now."""
        with self._lock:
            known = self._sizes.get(key)
            if size is not None or known is not None:
                self._sizes[key] = (size if size is not None else known[0], time.time())

    def total(self) -> int:
        with self._lock:
            self._refresh()
            return sum(size for size, _ in self._sizes.values())

    def full(self) -> bool:
        """Over budget with nothing left that may be evicted: warming more ahead would only grow the overrun."""
        with self._lock:
            self._refresh()
            excess = sum(size for size, _ in self._sizes.values()) - self.max_bytes
            return excess >= 0 and all(self._pins[k] > 0 for k in self._sizes)

    def enforce(self, keep: str | None = None) -> list[str]:
        """Evict least-recently-used, unpinned entries (never `keep`) until the cache fits. Returns their keys."""
        with self._lock:
            self._refresh()
            total = sum(size for size, _ in self._sizes.values())
            if total <= self.max_bytes:
                return []
            victims = []
            for key, (size, _) in sorted(self._sizes.items(), key=lambda kv: kv[1][1]):
                if total <= self.max_bytes:
                    break
                if key == keep or self._pins[key] > 0:
                    continue
                victims.append(key)
                total -= size
            for key in victims:
                del self._sizes[key]
        for key in victims:
            self.layout.entry_path(key).unlink(missing_ok=True)
        self.evicted += len(victims)
        if victims:
            log.debug("cache budget %.1f MB: evicted %d least recently used entries",
                      self.max_bytes / 1e6, len(victims))
        return victims

    def _refresh(self) -> None:
        now = time.monotonic()
        if self._scanned_at is not None and now - self._scanned_at < RESCAN_S:
            return
        sizes = {}
        for path in self.layout.entries():
            try:
                st = path.stat()
            except OSError:
                continue  # evicted or replaced meanwhile
            sizes[path.stem] = (st.st_size, st.st_mtime)
        for key, (_size, used) in self._sizes.items():  # this process's newer view of last use wins
            if key in sizes:
                sizes[key] = (sizes[key][0], max(used, sizes[key][1]))
        self._sizes = sizes
        self._scanned_at = now


# -- the planner's check ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedEntry:
    """One distinct video entry a run needs: its size as uint8 frames, and its cache key when known."""

    raw_bytes: int  # frames x height x width x 3
    key: str | None = None


@dataclass(frozen=True)
class CacheFit:
    root: str
    entries: int  # distinct entries the run needs
    cached: int  # of them already in the cache (not written again)
    cached_bytes: int
    new_bytes: int  # estimated bytes still to write
    cache_bytes: int  # everything in the cache now
    budget_bytes: int | None
    free_bytes: int  # free disk where the cache lives
    ratio: float  # entry bytes per raw byte assumed for the new entries
    codec: str

    @property
    def needed_bytes(self) -> int:
        """What the run's entries take together once written."""
        return self.cached_bytes + self.new_bytes

    @property
    def fits_budget(self) -> bool:
        return self.budget_bytes is None or self.needed_bytes <= self.budget_bytes

    @property
    def grows_by(self) -> int:
        """How much the cache directory grows: a budget caps it (older entries are evicted instead)."""
        if self.budget_bytes is None:
            return self.new_bytes
        return max(0, min(self.cache_bytes + self.new_bytes, self.budget_bytes) - self.cache_bytes)

    @property
    def fits_disk(self) -> bool:
        return self.grows_by <= self.free_bytes

    def warnings(self) -> list[str]:
        out = []
        if not self.fits_budget:
            out.append(f"the run's frames need {self.needed_bytes / 1e9:.1f} GB of cache, over the "
                       f"{self.budget_bytes / 1e9:.1f} GB budget: entries are evicted while it runs and decoded "
                       f"again by later runs (results are unchanged); raise --cache-max-gb to keep them all")
        if not self.fits_disk:
            out.append(f"the frame cache at {self.root} would grow by {self.grows_by / 1e9:.1f} GB but only "
                       f"{self.free_bytes / 1e9:.1f} GB of disk is free: set --cache-max-gb below that, or free disk")
        return out


def check_cache_fit(
    root: Path, entries: Iterable[PlannedEntry], max_bytes: int | None = None, codec: str | None = None
) -> CacheFit:
    """Whether a run's frame cache fits the budget (`max_bytes`, default $VBENCH_ASYNC_CACHE_MAX_GB) and the free
    disk. Entries whose key is already in the cache count with their real size; new ones at `raw_bytes` times the
    compression ratio the cache's own entries of that codec show (PLANNING_RATIO while it has none). Reads headers
    only (at most 64 of them) and stats the rest; no video is opened."""
    layout = CacheLayout(Path(root).expanduser())
    codec = codec or default_codec()
    max_bytes = budget_from_env() if max_bytes is None else max_bytes
    present = {p.stem: p for p in layout.entries()}
    sizes = {key: entry_size(path) for key, path in present.items()}
    seen: set[str] = set()
    count = cached = cached_bytes = raw_new = 0
    for entry in entries:
        if entry.key is not None:
            if entry.key in seen:
                continue
            seen.add(entry.key)
        count += 1
        if entry.key is not None and entry.key in sizes:
            cached += 1
            cached_bytes += sizes[entry.key]
        else:
            raw_new += entry.raw_bytes
    ratio = compression_ratio(layout, codec, present.values())
    return CacheFit(
        root=str(layout.root), entries=count, cached=cached, cached_bytes=cached_bytes,
        new_bytes=int(raw_new * ratio), cache_bytes=sum(sizes.values()), budget_bytes=max_bytes,
        free_bytes=free_disk(layout.root), ratio=ratio, codec=codec,
    )


def compression_ratio(layout: CacheLayout, codec: str, paths: Iterable[Path] | None = None, sample: int = 64) -> float:
    """Mean entry bytes per raw frame byte over up to `sample` entries written with `codec`."""
    stored = raw = seen = 0
    for path in paths if paths is not None else layout.entries():
        if seen >= sample:
            break
        try:
            header = read_header(path)
        except CorruptEntry:
            continue
        if header.codec == codec:
            seen += 1
            stored += entry_size(path)
            raw += header.raw_bytes
    return stored / raw if raw else PLANNING_RATIO.get(codec, 1.0)


def free_disk(path: Path) -> int:
    """Free bytes on the filesystem holding `path` (or its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def entry_size(path: Path) -> int:
    """Bytes a cache file takes; 0 once it is gone (another process may evict or replace it at any time)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
