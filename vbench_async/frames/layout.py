"""Where things live in a cache directory, and the failure records.

    <root>/vbf1/entries/<key[:2]>/<key>.safetensors   frames + metadata (store.py)
    <root>/vbf1/failures/<key>.json                   why a video failed: kind, message, decoder, time
    <root>/vbf1/fingerprints/<xx>/<path hash>.json    a video's content hash and the stat fields it was made from
    <root>/vbf1/labels/<benchmark>/<set hash>.keys    keys a run of that benchmark used (`cache stats` by benchmark)
    .tmp-<host>-<pid>-...                              files being written (renamed into place when complete)

The format version is a directory so a newer layout never misreads an older one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..homes import default_cache_dir  # noqa: F401 - re-exported (the cache, the package)
from .entry_file import TMP_PREFIX, read_regular_text, temp_path
from .errors import FrameError
from .video import FORMAT_VERSION


@dataclass(frozen=True)
class CacheLayout:
    root: Path

    @property
    def base(self) -> Path:
        return self.root / FORMAT_VERSION

    def entry_path(self, key: str) -> Path:
        return self.base / "entries" / key[:2] / f"{key}.safetensors"

    def failure_path(self, key: str) -> Path:
        return self.base / "failures" / f"{key}.json"

    @property
    def fingerprints(self) -> Path:
        return self.base / "fingerprints"

    @property
    def labels(self) -> Path:
        return self.base / "labels"

    def entries(self) -> Iterator[Path]:
        yield from sorted(p for p in (self.base / "entries").glob("*/*.safetensors") if not _is_temp(p))

    def failures(self) -> Iterator[Path]:
        yield from sorted(p for p in (self.base / "failures").glob("*.json") if not _is_temp(p))

    def fingerprint_records(self) -> Iterator[Path]:
        yield from sorted(p for p in self.fingerprints.glob("*/*.json") if not _is_temp(p))

    def temp_files(self) -> Iterator[Path]:
        yield from (self.base / "entries").glob(f"*/{TMP_PREFIX}*")
        yield from (self.base / "failures").glob(f"{TMP_PREFIX}*")
        yield from self.fingerprints.glob(f"*/{TMP_PREFIX}*")
        yield from self.labels.glob(f"*/{TMP_PREFIX}*")


def _is_temp(path: Path) -> bool:
    return path.name.startswith(TMP_PREFIX)  # pathlib's "*" also matches dot files


@dataclass(frozen=True)
class FailureRecord:
    """A video that failed, so later runs report it without decoding again (until retried on request)."""

    key: str
    kind: str
    message: str
    decoder: str
    video: str  # path at the time of the failure (for people; the key does not depend on it)
    time: float
    window: tuple[float, float | None] | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)

    def error(self) -> FrameError:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.time))
        hint = f"[recorded {when} with {self.decoder}; retry_failed / --retry-failed decodes it again]"
        return FrameError(self.kind, f"{self.message} {hint}")

    def to_json(self) -> str:
        d = asdict(self)
        d["spec"] = dict(self.spec)
        return json.dumps(d, indent=1)

    @classmethod
    def read(cls, path: Path) -> FailureRecord | None:
        """The record at `path`, or None if absent or unreadable (an unreadable record is just retried)."""
        try:
            d = json.loads(read_regular_text(path))  # a FIFO in its place is unreadable, not a hang
            window = tuple(d["window"]) if d.get("window") is not None else None
            return cls(**{**d, "window": window})
        except (OSError, ValueError, TypeError, KeyError):
            return None


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
