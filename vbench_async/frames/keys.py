"""Content-addressed cache keys: what the video *is* (a hash of its bytes), not where it lives.

The default "full" fingerprint is SHA-256 over every byte, so two files that differ anywhere get different keys
(and different vLLM multimodal uuids). "sampled" (size plus five 64 KiB blocks: head, quarters, tail) costs the
same for any size but lets two files that differ only between those blocks share a key: an explicit opt-in for
data that is known not to collide. Fingerprints are memoized per (path, device, inode, size, mtime, ctime): in
memory, and on disk next to the entries, so a second run (or the planner) hashes nothing it hashed before.
perf/frames.py measures both modes.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..record_io import OutputRecord, RecordError, always
from .decode_video import check_video_file
from .keyhash import key_of
from .spec import FrameSpec, Window, normalize_window

BLOCK = 64 << 10
FINGERPRINTS = ("full", "sampled")
DEFAULT_FINGERPRINT = "full"


def fingerprint(path: Path, mode: str = DEFAULT_FINGERPRINT) -> str:
    """Hex digest identifying the file's content (FrameError if it is missing or empty)."""
    _check_mode(mode)
    size = check_video_file(path)
    if mode == "full":
        digest = hashlib.sha256(f"full:{size}:".encode())
    else:
        digest = hashlib.blake2b(f"sampled:{size}:".encode(), digest_size=20)
    with open(path, "rb") as f:
        if mode == "full" or size <= 5 * BLOCK:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        else:
            for offset in (0, size // 4, size // 2, 3 * size // 4, size - BLOCK):
                f.seek(offset)
                digest.update(f.read(BLOCK))
    return digest.hexdigest()[:40]


def cache_key(video_fingerprint: str, spec: FrameSpec, window: Window | None) -> str:
    """32 hex chars over (content, frame-changing spec fields, window, format version); decoder excluded."""
    return key_of(video_fingerprint, spec.key_fields(), normalize_window(window))


def _check_mode(mode: str) -> None:
    if mode not in FINGERPRINTS:
        raise ValueError(f"unknown fingerprint mode {mode!r}; choose from {', '.join(FINGERPRINTS)}")


class FingerprintMemo:
    """Thread-safe memo of fingerprints, invalidated when the file's identity or times change.

    `store` (a folder) keeps them across processes and machines; each record names the file and the stat fields it
    was made from, and is only used when all of them still match. An unwritable store is simply not written."""

    def __init__(self, mode: str = DEFAULT_FINGERPRINT, store: Path | None = None):
        _check_mode(mode)
        self.mode = mode
        self.store = store
        self._memo: dict[tuple, str] = {}
        self._lock = threading.Lock()

    def __call__(self, path: Path) -> str:
        try:
            absolute = os.path.abspath(path)
            st = os.stat(absolute)
            stamp = (absolute, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, self.mode)
        except OSError:
            return fingerprint(path, self.mode)  # raises the right FrameError
        with self._lock:
            known = self._memo.get(stamp)
        if known is None:
            known = self._load(stamp)
            if known is None:
                known = fingerprint(path, self.mode)
                self._save(stamp, known)
            with self._lock:
                self._memo[stamp] = known
        return known

    def _record_path(self, stamp: tuple) -> Path | None:
        if self.store is None:
            return None
        name = hashlib.blake2b(f"{stamp[0]}\0{self.mode}".encode(), digest_size=16).hexdigest()
        return self.store / name[:2] / f"{name}.json"

    def _load(self, stamp: tuple) -> str | None:
        record_path = self._record_path(stamp)
        if record_path is None:
            return None
        record = read_record(record_path)
        if record is None or tuple(record.stamp) != stamp[1:] or record.path != stamp[0]:
            return None
        return record.digest

    def _save(self, stamp: tuple, digest: str) -> None:
        record_path = self._record_path(stamp)
        if record_path is None:
            return
        from .layout import write_text_atomic

        try:
            record = FingerprintRecord.made(path=stamp[0], stamp=list(stamp[1:]), mode=self.mode, digest=digest)
            write_text_atomic(record_path, json.dumps(record.to_json()))
        except OSError:
            pass  # a read-only cache: the in-memory memo still holds it


@dataclass
class FingerprintRecord(OutputRecord):
    """A fingerprint kept on disk (fingerprints/<xx>/<name>.json): the file and the stat fields it was made from
    (device, inode, size, mtime, ctime, then the mode), the digest, and a checksum over all of them."""

    path: str = always("")
    stamp: list[Any] = always(default_factory=list)
    mode: str = always("")
    digest: str = always("")
    check: str = always("")

    @classmethod
    def made(cls, path: str, stamp: list[Any], mode: str, digest: str) -> FingerprintRecord:
        record = cls(path=path, stamp=stamp, mode=mode, digest=digest)
        return replace(record, check=record_check(record))

    @property
    def sound(self) -> bool:
        """Every field was written and the checksum holds (an earlier version's record has none)."""
        return all(self.has(k) for k in ("path", "stamp", "mode", "digest")) and self.check == record_check(self)


def record_check(record: FingerprintRecord) -> str:
    """The checksum a fingerprint record carries over its path, stat fields, mode and digest: a record whose digest
    was changed (to another video's: the run would serve that video's frames) fails it and is not used."""
    fields = {"path": record.path, "stamp": record.stamp, "mode": record.mode, "digest": record.digest}
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(b"vbench-async fingerprint record\0" + blob, digest_size=16).hexdigest()


def read_record(path: Path) -> FingerprintRecord | None:
    """A fingerprint record if it is a regular file, parses and carries its own checksum (an earlier version's
    record, without one, is not used: the file is hashed again); None otherwise. Never opens a FIFO for a blocking
    read."""
    from .entry_file import read_regular_text

    try:
        record = FingerprintRecord.from_json(json.loads(read_regular_text(path)), str(path))
    except (OSError, ValueError, RecordError):
        return None
    return record if record.sound else None
