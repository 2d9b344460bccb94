"""`FrameCache`: content-addressed frames on disk, decoded on a miss in a worker process with a timeout.

Thread-safe: the async pipeline calls `get_or_decode` from worker threads. Two threads asking for the same key
share one decode; two processes (or machines sharing the directory) may both decode the same key, which is
harmless because entries are written atomically and hold the same frames. A failure is recorded next to the
entries and re-raised from the record on later calls (no decode) unless `retry_failed` is set.

Entries are compressed losslessly by default (codecs.py) and decompressed in the calling (loader) thread. With a
budget (`max_bytes`, default $VBENCH_ASYNC_CACHE_MAX_GB) least-recently-used entries are evicted as new ones are
written, except those `reserve`d for queued requests: each reservation is released when its frames are loaded.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Iterable, Protocol

from ..failure_kinds import FINAL_KINDS, FailureKind
from ..record_io import RecordError
from .codecs import RAW, check_codec, default_codec
from .compactor import Compactor
from .decode_job import DecodeJob, DecodeTarget
from .decoders import DECODERS, DEFAULT_DECODER
from .disk_budget import Budget, budget_from_env, entry_size
from .entry_file import (
    CorruptEntry,
    EntryMissing,
    discard_entry,
    load_entry,
    read_header,
    writer_tag,
)
from .errors import FrameError
from .keys import DEFAULT_FINGERPRINT, FingerprintMemo, cache_key
from .labels import record_labels
from .layout import CacheLayout, FailureRecord, default_cache_dir, write_text_atomic
from .pool import DecodePool, WorkerStartError
from .spec import FrameSpec, Window, normalize_window
from .video import CachedVideo

log = logging.getLogger(__name__)

REUSED, DECODED, DEFERRED = "reused", "decoded", "deferred"
DECODE_TRIES = 3  # a fresh entry removed before it was read (`cache gc`, another process's budget) is decoded again


class _Job(Protocol):  # preprocess.VideoJob
    video: Path
    spec: FrameSpec
    window: Window | None
    benchmark: str | None


class FrameCache:
    def __init__(
        self,
        root: Path,
        decoder: str = DEFAULT_DECODER,
        timeout_s: float = 120.0,
        *,
        workers: int | None = None,
        retry_failed: bool = False,
        fingerprint: str = DEFAULT_FINGERPRINT,
        codec: str | None = None,
        max_bytes: int | None = None,
        compress_later: bool = False,
    ):
        """`workers` caps the decode processes (started lazily; default: CPU count). `codec` is how new entries
        are stored (default $VBENCH_ASYNC_CACHE_CODEC, else zstd); every codec is read back whatever this says.
        `compress_later` (a run's cache): new entries are written raw and compressed to `codec` by a background
        process at idle priority (compactor.py), as are raw entries this cache loads; off the critical path."""
        if decoder not in DECODERS:
            raise ValueError(f"unknown decoder {decoder!r}; choose from {', '.join(DECODERS)}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.root = Path(root).expanduser()
        self.layout = CacheLayout(self.root)
        self.decoder = decoder
        self.retry_failed = retry_failed
        self.codec = check_codec(codec) if codec else default_codec()
        later = compress_later and self.codec != RAW
        self._write_codec = RAW if later else self.codec
        self._compactor = Compactor(self.codec) if later else None
        self._fingerprint = FingerprintMemo(fingerprint, store=self.layout.fingerprints)
        max_bytes = budget_from_env() if max_bytes is None else max_bytes
        self.budget = Budget(self.layout, max_bytes) if max_bytes is not None else None
        self._pool = DecodePool(workers or os.cpu_count() or 1, timeout_s, decoder)
        self._finalizer = weakref.finalize(self, _close, self._pool, self._compactor)
        self._inflight: dict[str, Future] = {}
        self._reserved: dict[str, int] = {}  # key -> reservations not yet loaded
        self._lock = threading.Lock()
        self.decodes = 0  # decode jobs this object has run (a fully cached pass leaves it unchanged)

    @classmethod
    def default(cls, **kwargs) -> FrameCache:
        """A cache in the default directory (`homes.default_cache_dir`)."""
        return cls(default_cache_dir(), **kwargs)

    @classmethod
    def at(cls, root: Path | None, max_gb: float | None = None, **kwargs: Any) -> FrameCache:
        """The cache a command opens: at `root` (default: the default directory), under a budget of `max_gb`
        gigabytes; a bad budget or codec (the environment's too) is the user's to fix, a UserError."""
        from ..errors import UserError
        from .disk_budget import gb_to_bytes

        try:
            if max_gb is not None:
                kwargs["max_bytes"] = gb_to_bytes(max_gb)
            return cls(Path(root) if root else default_cache_dir(), **kwargs)
        except ValueError as exc:
            raise UserError(str(exc)) from exc

    # -- lookups ------------------------------------------------------------------------------------------
    def fingerprint(self, video: Path) -> str:
        """The content fingerprint the keys of `video` are made from (FrameError if it is missing or empty)."""
        return self._fingerprint(Path(video))

    def key(self, video: Path, spec: FrameSpec, window: Window | None = None) -> str:
        """Cache key of (video content, spec, window). FrameError if the video is missing or empty."""
        return cache_key(self._fingerprint(Path(video)), spec, window)

    def get(self, video: Path, spec: FrameSpec, window: Window | None = None) -> CachedVideo | None:
        """The cached frames, or None (miss, missing video, or a corrupt entry, which is removed)."""
        try:
            key = self.key(video, spec, window)
        except FrameError:
            return None
        return self._load(key)

    def has(self, video: Path, spec: FrameSpec, window: Window | None = None) -> bool:
        """Whether a valid entry exists, checked from its header alone (no frames are read)."""
        try:
            return self._valid(self.key(video, spec, window))
        except FrameError:
            return False

    def failure(self, video: Path, spec: FrameSpec, window: Window | None = None) -> FailureRecord | None:
        try:
            return FailureRecord.read(self.layout.failure_path(self.key(video, spec, window)))
        except FrameError:
            return None

    def get_or_decode(
        self, video: Path, spec: FrameSpec, window: Window | None = None, *, retry_failed: bool | None = None
    ) -> CachedVideo:
        """Cached frames, decoding on a miss. Raises FrameError (kind says why); never hangs past the timeout.
        Releases one reservation of the key (see `reserve`), whatever the outcome."""
        key = self.key(video, spec, window)
        if self.budget is not None:
            self.budget.pin(key)  # held while this call decodes and reads the entry
        try:
            hit = self._load(key)
            for _ in range(DECODE_TRIES):
                if hit is not None:
                    return hit
                self._decode(key, Path(video), spec, window, retry_failed)
                hit = self._load(key)
            if hit is not None:
                return hit
            # Not the video's fault (its frames were decoded and written): transient, never recorded.
            raise FrameError(FailureKind.CACHE_CONTENDED, f"the cache entry for {video} was removed or replaced "
                                                          f"{DECODE_TRIES} times before it could be read (cache "
                                                          "maintenance running beside?)")
        finally:
            if self.budget is not None:
                self.budget.unpin(key)
                with self._lock:
                    reserved = self._reserved.pop(key, 0)
                    if reserved > 1:
                        self._reserved[key] = reserved - 1
                if reserved:
                    self.budget.unpin(key)

    def ensure(
        self, video: Path, spec: FrameSpec, window: Window | None = None, *, retry_failed: bool | None = None
    ) -> str:
        """Make sure an entry exists without loading its frames: returns "reused", "decoded", or "deferred" when
        the budget is already taken by entries that queued requests need (the loaders decode it on demand)."""
        key = self.key(video, spec, window)
        if self._valid(key):
            return REUSED
        if self.budget is not None and self.budget.full():
            return DEFERRED
        return self._decode(key, Path(video), spec, window, retry_failed)

    def ensure_specs(
        self, video: Path, specs: list[FrameSpec], window: Window | None = None, *, retry_failed: bool | None = None
    ) -> list[str]:
        """`ensure` for several specs of one video and window (a frame-budget sweep): the missing entries are all
        sampled from one decode pass over the video. One outcome per spec."""
        keys = [self.key(video, s, window) for s in specs]
        missing = [(k, s) for k, s in zip(keys, specs) if not self._valid(k)]
        if len(missing) < 2 or (self.budget is not None and self.budget.full()):  # nothing to share
            return [self.ensure(video, s, window, retry_failed=retry_failed) for s in specs]
        retry = self.retry_failed if retry_failed is None else retry_failed
        for k, _ in missing:
            record = None if retry else FailureRecord.read(self.layout.failure_path(k))
            if record is not None and record.kind in FINAL_KINDS:
                raise record.error()
        (key, spec), extra = missing[0], missing[1:]
        outcome = self._decode_now(key, Path(video), spec, window, extra)
        if outcome is not None:
            raise FrameError(*outcome)
        fresh = {k for k, _ in missing}
        return [DECODED if k in fresh else REUSED for k in keys]

    def reserve(self, jobs: Iterable[_Job]) -> int:
        """Note the videos queued requests will load (one reservation per distinct path, spec and window, as the
        pipeline groups them): the budget never evicts them until `get_or_decode` has loaded them. Also records
        which benchmark uses which entry. Unreadable videos are skipped (loading them fails on its own).
        Returns the number of reservations."""
        seen: set[tuple] = set()
        labels: dict[str, list[str]] = {}
        count = 0
        for job in jobs:
            group = (str(job.video), job.spec, job.window)  # exactly how pipeline.group_by_video groups them
            if group in seen:
                continue
            seen.add(group)
            try:
                key = self.key(job.video, job.spec, job.window)
            except FrameError:
                continue
            if job.benchmark:
                labels.setdefault(job.benchmark, []).append(key)
            if self.budget is not None:
                self.budget.pin(key)
                with self._lock:
                    self._reserved[key] = self._reserved.get(key, 0) + 1
            count += 1
        for benchmark, keys in labels.items():
            record_labels(self.layout, benchmark, keys)
        return count

    # -- internals ----------------------------------------------------------------------------------------
    def _load(self, key: str) -> CachedVideo | None:
        path = self.layout.entry_path(key)
        try:
            frames, header = load_entry(path, key)
        except CorruptEntry as exc:
            _discard(path, exc)
            return None
        meta = header.meta
        if self._compactor is not None and header.codec == RAW:
            self._compactor.submit(path)  # written raw on some run's critical path: compressed when the CPU idles
        _touch(path)
        if self.budget is not None:
            self.budget.used(key)
        return CachedVideo(key=key, frames=frames, meta=meta)

    def _valid(self, key: str) -> bool:
        path = self.layout.entry_path(key)
        try:
            read_header(path, key)
            return True
        except CorruptEntry as exc:
            _discard(path, exc)
            return False

    def _decode(self, key: str, video: Path, spec: FrameSpec, window: Window | None, retry: bool | None) -> str:
        retry = self.retry_failed if retry is None else retry
        if not retry:
            record = FailureRecord.read(self.layout.failure_path(key))
            if record is not None and record.kind in FINAL_KINDS:  # a transient failure is tried again
                raise record.error()
        with self._lock:
            shared = self._inflight.get(key)
            if shared is None:
                shared = self._inflight[key] = Future()
                owner = True
            else:
                owner = False
        if not owner:  # another thread is decoding this key: wait for its outcome
            outcome = shared.result()
            if outcome is not None:
                raise FrameError(*outcome)
            return DECODED
        outcome: tuple[str, str] | None = None
        try:
            outcome = self._decode_now(key, video, spec, window)
        finally:
            with self._lock:
                del self._inflight[key]
            shared.set_result(outcome)
        if outcome is not None:
            raise FrameError(*outcome)
        return DECODED

    def _decode_now(self, key: str, video: Path, spec: FrameSpec, window: Window | None,
                    extra: list[tuple[str, FrameSpec]] = ()) -> tuple[str, str] | None:
        """Decode `key` (and the `extra` (key, spec) entries of the same video and window, in the same pass)."""
        if not extra and self._valid(key):  # another process may have finished it meanwhile
            return None
        out = self.layout.entry_path(key)
        window = normalize_window(window)
        job = DecodeJob(
            id=key,
            video=str(video.resolve()),
            fingerprint=self._fingerprint(video),
            spec=spec.to_dict(),
            window=list(window) if window is not None else None,
            decoder=self.decoder,
            codec=self._write_codec,
            out=str(out),
            same_pass=[DecodeTarget(spec=s.to_dict(), out=str(self.layout.entry_path(k)), key=k) for k, s in extra],
        )
        with self._lock:
            self.decodes += 1
        try:
            reply = self._pool.run(job)
        except WorkerStartError as exc:
            return (FailureKind.WORKER_ERROR, str(exc))  # not the video's fault: not recorded
        except RecordError as exc:  # a worker of another version: not the video's fault either
            return (FailureKind.WORKER_ERROR, str(exc))
        if reply.ok:
            for k, _ in [(key, spec), *extra]:
                self.layout.failure_path(k).unlink(missing_ok=True)
                if self.budget is not None:
                    size = reply.bytes if not extra else entry_size(self.layout.entry_path(k))
                    self.budget.used(k, size)
                    self.budget.enforce(keep=k)
            return None
        for leftover in out.parent.glob(f"{writer_tag(reply.pid)}*"):  # a killed worker's partial file
            leftover.unlink(missing_ok=True)
        kind, message = reply.kind, reply.message
        if kind not in FINAL_KINDS:  # load, a crash or the environment: not the video's fault, so not recorded
            return (kind, message)
        for k, s in [(key, spec), *extra]:  # the video's fault: every spec of it failed alike
            record = FailureRecord(
                key=k,
                kind=kind,
                message=message,
                decoder=self.decoder,
                video=str(video),
                time=time.time(),
                window=normalize_window(window),
                spec=s.key_fields(),
            )
            write_text_atomic(self.layout.failure_path(k), record.to_json())
        return (kind, message)

    def set_max_workers(self, n: int) -> None:
        """Allow up to n decode processes (preprocess raises it to its --workers)."""
        self._pool.set_max_workers(n)

    def close(self, compact_wait_s: float = 0.0) -> None:
        """Stop the decode workers (they also stop on their own when this process exits) and the compactor, after
        letting it finish its queue for up to `compact_wait_s` seconds (what it does not reach stays raw)."""
        if self._compactor is not None:
            self._compactor.close(compact_wait_s)
        self._finalizer()

    def __enter__(self) -> FrameCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close(pool: DecodePool, compactor: Compactor | None) -> None:
    if compactor is not None:
        compactor.close()
    pool.close()


def _discard(path: Path, exc: CorruptEntry) -> None:
    """Remove the damaged file just read (only that one: see store.discard_entry); a missing one is a plain miss."""
    if isinstance(exc, EntryMissing):
        return
    log.warning("removing corrupt cache entry %s: %s", path, exc)
    discard_entry(path, exc.stat)


def _touch(path: Path) -> None:
    """Mark an entry as recently used (gc evicts by age); a read-only cache simply skips it."""
    try:
        os.utime(path)
    except OSError:
        pass
