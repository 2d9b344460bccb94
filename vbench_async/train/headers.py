"""Video headers of a training data set: probed once per data set, by one rank, and shared with the others.

Splitting the frame cache's preparation by decoding cost (`data.split_by_cost`) needs each video's frame count and
rate, read from its container header (`sharding.probe_video`, no decoding). Rank 0 keeps them in one JSON file per
data set under the frame cache, `probes/train-<data set>.json`, each entry under the video's path with the file's
size and modification time: a later launch reads the file and probes only the videos that are new or changed. The
other ranks receive rank 0's headers through the launcher's store (`watch.exchange`), so a launch of 64 ranks reads
each header once instead of 64 times, and every rank splits from the same headers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..frames.layout import write_text_atomic
from ..record_io import OutputRecord, RecordError, always, read_record
from ..sharding import VideoProbe, probe_all
from . import watch
from .config import DataConfig

log = logging.getLogger(__name__)

Headers = Mapping[str, "VideoProbe | None"]  # video path -> header (None: unreadable, costs the median)
HeaderSource = Callable[[Sequence[str]], Headers]
FORMAT = 1


def dataset_name(cfg: DataConfig) -> str:
    """The data set a header file belongs to: its card or records file, and where its videos are."""
    source = {"benchmark": cfg.benchmark, "records": cfg.records, "data_root": cfg.data_root,
              "video_dir": cfg.video_dir}
    label = cfg.benchmark or Path(cfg.records or "records").stem
    return f"{label}-{hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:12]}"


def _stamp(video: str) -> list[int] | None:
    """What a stored header is valid for: the file's size and modification time (None: no such file)."""
    try:
        st = os.stat(video)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


@dataclass
class HeaderEntry(OutputRecord):
    """One video's stored header: the file's size and modification time it was read from, and the header (None:
    unreadable)."""

    stamp: list[int] = always(default_factory=list)
    probe: list[float] | None = always()

    @property
    def header(self) -> VideoProbe | None:
        return VideoProbe(self.probe[0], int(self.probe[1])) if self.probe else None  # (fps, total frames)


@dataclass
class HeadersRecord(OutputRecord):
    """The file: its format and each video's entry (kept as read: a damaged entry costs only that video a probe)."""

    format: int | None = always()
    videos: dict[str, Any] = always(default_factory=dict)

    def entry(self, video: str) -> HeaderEntry | None:
        try:
            return HeaderEntry.from_json(self.videos[video], video) if video in self.videos else None
        except RecordError:  # damaged: probed again
            return None


class HeaderFile:
    """The headers of one data set's videos, kept in `root`/probes/train-`name`.json."""

    def __init__(self, root: Path, name: str):
        self.path = Path(root) / "probes" / f"train-{name}.json"
        self.probed = 0  # headers this object read from videos (the rest came from the file)

    def headers(self, videos: Sequence[str]) -> dict[str, VideoProbe | None]:
        known = self._read()
        out: dict[str, VideoProbe | None] = {}
        entries: dict[str, HeaderEntry] = {}
        todo: dict[str, list[int] | None] = {}
        for video in sorted(set(videos)):
            stamp, entry = _stamp(video), known.entry(video)
            if stamp is not None and entry is not None and entry.stamp == stamp:
                out[video] = entry.header
                entries[video] = entry
            else:
                todo[video] = stamp
        if todo:
            probes = probe_all(Path(v) for v in todo)
            self.probed += len(todo)
            for video, stamp in todo.items():
                out[video] = probe = probes.get(Path(video))
                if stamp is not None:  # a missing file is probed again next time (it fails fast)
                    entries[video] = HeaderEntry(stamp=stamp, probe=list(probe) if probe else None)
            self._write(entries)
        return out

    def _read(self) -> HeadersRecord:
        try:
            stored = read_record(HeadersRecord, self.path)
        except (OSError, RecordError):  # none yet, or damaged: probe again
            return HeadersRecord()
        return stored if stored.format == FORMAT else HeadersRecord()

    def _write(self, entries: dict[str, HeaderEntry]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.path, json.dumps(HeadersRecord(format=FORMAT, videos=entries).to_json()))
        except OSError as exc:  # a read-only cache: the split still works, the next launch probes again
            log.warning("cannot keep the video headers in %s: %s", self.path, exc)


def encode(headers: Headers) -> str:
    return json.dumps({v: list(p) if p else None for v, p in headers.items()})


def decode(text: str) -> dict[str, VideoProbe | None]:
    return {v: VideoProbe(*p) if p else None for v, p in json.loads(text).items()}


class SharedHeaders:
    """Headers read by rank 0 (`file`), received by the other ranks of the launch through the store; every rank
    calls it with the same videos, the same number of times."""

    def __init__(self, file: HeaderFile, rank: int, world: int):
        self.file, self.rank, self.world = file, rank, world
        self._calls = 0

    def __call__(self, videos: Sequence[str]) -> dict[str, VideoProbe | None]:
        if self.world == 1:
            return self.file.headers(videos)
        text = encode(self.file.headers(videos)) if self.rank == 0 else ""
        posted = watch.exchange(f"headers-{self._calls}", text)
        self._calls += 1
        if posted is None:  # no store to wait on: a collective (bounded by fsdp.timeout_s)
            return decode(watch.broadcast_text(text, src=0))
        return decode(posted[0])
