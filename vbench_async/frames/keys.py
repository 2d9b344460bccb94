"""Content-addressed cache keys: what the video *is* (a fingerprint of its bytes), not where it lives.

The "sampled" fingerprint hashes the size plus five 64 KiB blocks spread over the file (head, quarters, tail),
so its cost does not grow with the video; "full" hashes every byte (perf/frames.py measures both). Fingerprints
are memoized per (path, inode, size, mtime), so repeated lookups of the same file cost one stat call.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from .extract import check_video_file
from .spec import FrameSpec, Window, normalize_window
from .video import FORMAT_VERSION

BLOCK = 64 << 10
FINGERPRINTS = ("sampled", "full")


def fingerprint(path: Path, mode: str = "sampled") -> str:
    """Hex digest identifying the file's content (FrameError if it is missing or empty)."""
    if mode not in FINGERPRINTS:
        raise ValueError(f"unknown fingerprint mode {mode!r}; choose from {', '.join(FINGERPRINTS)}")
    size = check_video_file(path)
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{mode}:{size}:".encode())
    with open(path, "rb") as f:
        if mode == "full" or size <= 5 * BLOCK:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        else:
            for offset in (0, size // 4, size // 2, 3 * size // 4, size - BLOCK):
                f.seek(offset)
                digest.update(f.read(BLOCK))
    return digest.hexdigest()


def cache_key(video_fingerprint: str, spec: FrameSpec, window: Window | None) -> str:
    """32 hex chars over (content, frame-changing spec fields, window, format version); decoder excluded."""
    payload = {
        "format": FORMAT_VERSION,
        "video": video_fingerprint,
        "spec": spec.key_fields(),
        "window": normalize_window(window),
    }
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=16).hexdigest()


class FingerprintMemo:
    """Thread-safe memo of fingerprints, invalidated when the file's inode, size or mtime changes."""

    def __init__(self, mode: str = "sampled"):
        if mode not in FINGERPRINTS:
            raise ValueError(f"unknown fingerprint mode {mode!r}; choose from {', '.join(FINGERPRINTS)}")
        self.mode = mode
        self._memo: dict[tuple, str] = {}
        self._lock = threading.Lock()

    def __call__(self, path: Path) -> str:
        try:
            st = os.stat(path)
            stamp = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            return fingerprint(path, self.mode)  # raises the right FrameError
        with self._lock:
            known = self._memo.get(stamp)
        if known is None:
            known = fingerprint(path, self.mode)
            with self._lock:
                self._memo[stamp] = known
        return known
