"""The decode worker's protocol as declared records (`worker.py` describes it): the job the cache sends
(`DecodeJob`, one JSON line) and the worker's answer (`DecodeReply`; the pool adds the worker's `pid`, and makes
the reply of a worker that timed out or died). How they are read and written: `record_io.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..failure_kinds import FailureKind
from ..record_io import OutputRecord, always

Window = list[float | None]  # normalize_window's (start, end), as JSON


@dataclass
class DecodeTarget(OutputRecord):
    """One more entry sampled from the same decode pass: its spec (`FrameSpec.to_dict`), file and key."""

    spec: dict[str, Any] = always(default_factory=dict)
    out: str = always("")
    key: str = always("")


@dataclass
class DecodeJob(OutputRecord):
    id: str = always("")  # the entry's key
    video: str = always("")  # the video's absolute path
    fingerprint: str = always("")  # the video's content fingerprint
    spec: dict[str, Any] = always(default_factory=dict)  # FrameSpec.to_dict()
    window: Window | None = always()
    decoder: str = always("")
    codec: str = always("raw")
    out: str = always("")  # where the entry is written
    # (not "extra", the protocol's name before it was declared: OutputRecord keeps undeclared keys under that name)
    same_pass: list[DecodeTarget] = always(default_factory=list)

    def targets(self) -> list[DecodeTarget]:
        """Every entry the job writes, its own first."""
        return [DecodeTarget(spec=self.spec, out=self.out, key=self.id), *self.same_pass]


@dataclass
class DecodeReply(OutputRecord):
    id: str | None = always()
    ok: bool = always(False)
    bytes: int = 0  # ok: the size of every entry written
    decode_seconds: float | None = None
    kind: str = FailureKind.DECODE_ERROR  # not ok: the failure's kind and message
    message: str = "unknown decode failure"
    pid: int | None = None  # the worker that answered (set by the pool)
