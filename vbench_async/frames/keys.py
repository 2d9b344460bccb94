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
from pathlib import Path

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
        record = self._record_path(stamp)
        if record is None:
            return None
        data = read_record(record)
        if data is None or tuple(data["stamp"]) != stamp[1:] or data["path"] != stamp[0]:
            return None
        return data["digest"]

    def _save(self, stamp: tuple, digest: str) -> None:
        record = self._record_path(stamp)
        if record is None:
            return
        from .layout import write_text_atomic

        try:
            data = {"path": stamp[0], "stamp": list(stamp[1:]), "mode": self.mode, "digest": digest}
            write_text_atomic(record, json.dumps({**data, "check": record_check(data)}))
        except OSError:
            pass  # a read-only cache: the in-memory memo still holds it


def record_check(data: dict) -> str:
    """The checksum a fingerprint record carries over its path, stat fields, mode and digest: a record whose digest
    was changed (to another video's: the run would serve that video's frames) fails it and is not used."""
    fields = {k: data[k] for k in ("path", "stamp", "mode", "digest")}
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(b"vbench-async fingerprint record\0" + blob, digest_size=16).hexdigest()


def read_record(path: Path) -> dict | None:
    """A fingerprint record if it is a regular file, parses and carries its own checksum (an earlier version's
    record, without one, is not used: the file is hashed again); None otherwise. Never opens a FIFO for a blocking
    read."""
    from .entry_file import read_regular_text

    try:
        data = json.loads(read_regular_text(path))
        if (not isinstance(data, dict) or not isinstance(data.get("digest"), str) or not isinstance(data["path"], str)
                or not isinstance(data["stamp"], list) or data.get("check") != record_check(data)):
            return None
        return data
    except (OSError, ValueError, KeyError, TypeError):
        return None
