"""Frame strips for the sample browser: small JPEG thumbnails of the frames a model received, written into the site.

A result line's `frames` record (result.FramesSeen) names the frame-cache entry that held the frames and the source
frame numbers. The thumbnails are made from that entry; when the entry is gone (evicted by a cache budget, another
machine) the same source frames are decoded again from the video file the run read. Each thumbnail is named by the
hash of its bytes, so runs, samples and benchmarks that saw the same frames share one file, and a site's size grows
with the distinct frames shown, not with the number of samples.

Strips are made once per cache entry, not once per build: the site keeps which thumbnails each entry's strip got
(`.vbench-async-strips.json`), and a rebuild (after a resume, a judge, a merge) reuses them while their files are there,
without reading the entry or encoding a JPEG again.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..sample_result import FramesSeen

log = logging.getLogger(__name__)

THUMB_WIDTH = 160  # pixels; the strip is for recognising scenes, not for reading text
JPEG_QUALITY = 70
MAX_PER_SAMPLE = 32  # a strip shows at most this many frames, evenly chosen, and says how many were sent
FOLDER = "frames"  # the site's thumbnail folder
ORIGINS = FROM_CACHE, FROM_VIDEO = "frame cache", "video file"  # where a strip's frames came from
MEMO = ".vbench-async-strips.json"  # which thumbnails each entry's strip got, for the next build (beside the marker)
# What a thumbnail depends on besides the frames: a memo of other settings is not reused.
MEMO_VERSION = f"{THUMB_WIDTH}px-q{JPEG_QUALITY}-{MAX_PER_SAMPLE}"
_NAME = re.compile(r"[0-9a-f]{20}\.jpg")  # a thumbnail's name (`_save`); a memo naming anything else is not used


@dataclass
class Strip:
    """What the page draws for one sample: thumbnails (site-relative paths) with their times, and the clip window."""

    thumbs: list[dict[str, Any]]  # {"src", "t" (seconds), "i" (source frame)}
    n: int  # frames the model received
    duration: float | None
    window: list[float | None] | None
    size: list[int] | None  # [height, width] as sent
    origin: str | None  # one of ORIGINS; None when no frames could be found
    missing: str | None = None  # why no thumbnails are shown

    def to_dict(self) -> dict[str, Any]:
        return {"thumbs": self.thumbs, "n": self.n, "duration": self.duration, "window": self.window,
                "size": self.size, "origin": self.origin, "missing": self.missing}


@dataclass(frozen=True)
class StripMemo:
    """The site's `MEMO` file: which thumbnails each strip got (origin, names), by "<cache key>:<source frames>"."""

    strips: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    version: str = MEMO_VERSION  # the thumbnail settings the strips were made with

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "strips": {k: [o, n] for k, (o, n) in sorted(self.strips.items())}}

    @classmethod
    def from_json(cls, data: Any) -> StripMemo:
        """The memo of the file's JSON; empty when it is of other thumbnail settings or no memo at all, and without
        the entries that do not look like ours (a hand-edited folder: origins, names other than `_save`'s)."""
        match data:
            case {"version": str(version), "strips": dict(strips)} if version == MEMO_VERSION:
                pass
            case _:
                return cls()
        kept = {}
        for key, value in strips.items():
            match value:
                case [str(origin), list(names)] if origin in ORIGINS and all(
                        isinstance(n, str) and _NAME.fullmatch(n) for n in names):
                    kept[str(key)] = (origin, list(names))
        return cls(kept)


@dataclass
class Thumbnailer:
    """Makes strips for result lines, writing each distinct thumbnail once through `write(rel_path, bytes)`.

    `reuse` is the last build's memo (`load_memo`): a strip found there whose files `keep(rel_path)` finds (and keeps
    in this build) is not made again. `memo()` is this build's, for the next one."""

    write: Callable[[str, bytes], None]
    cache_roots: list[Path]
    decoder: str | None = None
    reuse: StripMemo = field(default_factory=StripMemo)
    keep: Callable[[str], bool] | None = None
    written_bytes: int = 0
    _by_key: dict[str, tuple[str | None, list[str] | None, str | None]] = field(default_factory=dict)
    _names: set[str] = field(default_factory=set)
    _memo: dict[str, tuple[str, list[str]]] = field(default_factory=dict)

    def strip(self, seen: Any) -> Strip | None:
        """The strip for a result line's `frames` record; None when the line has none (no video, an old line)."""
        if not isinstance(seen, Mapping):
            return None
        record = FramesSeen.read(seen)
        numbers = _numbers(record) if record is not None else None
        if record is None or numbers is None:
            return Strip([], 0, None, None, None, None, "the line's frame record is malformed")
        indices, times = numbers
        key = record.cache_key
        chosen = _even(len(indices), MAX_PER_SAMPLE)
        if key not in self._by_key:
            memo_key = f"{key}:{','.join(str(indices[s]) for s in chosen)}"
            made = self._reused(memo_key) or self._thumbnails(key, indices, record.source, chosen)
            if made[1] is not None:
                self._memo[memo_key] = (str(made[0]), made[1])
            self._by_key[key] = made
        origin, names, missing = self._by_key[key]
        thumbs = [] if names is None else [
            {"src": f"{FOLDER}/{name}", "t": times[slot] if slot < len(times) else None, "i": indices[slot]}
            for slot, name in zip(chosen, names)]
        return Strip(thumbs=thumbs, n=len(indices), duration=float(record.duration),
                     window=list(record.window) if record.window is not None else None, size=list(record.size),
                     origin=origin, missing=missing)

    def _reused(self, memo_key: str) -> tuple[str | None, list[str] | None, str | None] | None:
        """The last build's strip for this entry and these frames, if every thumbnail file of it is still there."""
        if memo_key not in self.reuse.strips or self.keep is None:
            return None
        origin, names = self.reuse.strips[memo_key]
        if not all(self.keep(f"{FOLDER}/{name}") for name in names):
            return None
        return origin, names, None

    def memo(self) -> dict[str, Any]:
        """This build's strips, as `load_memo` reads them back."""
        return StripMemo(dict(self._memo)).to_json()

    def _thumbnails(self, key: str, indices: list[int], source: Any,
                    chosen: list[int]) -> tuple[str | None, list[str] | None, str | None]:
        frames = self._from_cache(key, indices)
        origin = FROM_CACHE
        if frames is None and source:
            frames, origin = _from_video(Path(str(source)), [indices[s] for s in chosen], self.decoder), FROM_VIDEO
            if frames is not None:
                chosen = list(range(len(chosen)))  # decoded exactly the chosen frames, in order
        if frames is None:
            why = "not in the frame cache" + (" and the video file is unreadable" if source else "")
            return None, None, f"frames {why}"
        return origin, [self._save(frames[s]) for s in chosen], None

    def _from_cache(self, key: str, indices: list[int]) -> np.ndarray | None:
        from ..frames.entry_file import CorruptEntry, read_entry
        from ..frames.layout import CacheLayout

        for root in self.cache_roots:
            path = CacheLayout(root).entry_path(key)
            if not path.is_file():
                continue
            try:
                frames, meta = read_entry(path)
            except (CorruptEntry, OSError) as exc:
                log.warning("frame strip: unreadable cache entry %s: %s", path, exc)
                continue
            if list(meta.frames_indices) == indices:  # the entry holds exactly the frames the line names
                return frames
        return None

    def _save(self, frame: np.ndarray) -> str:
        data = encode_thumbnail(frame)
        name = hashlib.sha256(data).hexdigest()[:20] + ".jpg"
        if name not in self._names:
            self._names.add(name)
            self.written_bytes += len(data)
        self.write(f"{FOLDER}/{name}", data)
        return name


def load_memo(site: Path) -> StripMemo:
    """The strips the site's last build made (`Thumbnailer.memo`); empty when there is none, it is of other thumbnail
    settings, or it is damaged (`StripMemo.from_json`)."""
    try:
        data = json.loads((site / MEMO).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return StripMemo()
    return StripMemo.from_json(data)


def encode_thumbnail(frame: np.ndarray, width: int = THUMB_WIDTH) -> bytes:
    """One RGB uint8 frame as a JPEG `width` pixels wide (never enlarged); deterministic bytes for the same frame."""
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(frame[..., :3]), "RGB")
    if image.width > width:
        image = image.resize((width, max(1, round(image.height * width / image.width))), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return buf.getvalue()


def _from_video(path: Path, indices: list[int], decoder: str | None) -> np.ndarray | None:
    """The given source frames decoded from the video file, in the given order; None if the file does not yield them."""
    from ..frames.decoders import DEFAULT_DECODER, open_video

    if not path.is_file():
        return None
    try:
        video = open_video(path, decoder or DEFAULT_DECODER)
        try:
            got = dict(video.read(sorted(set(indices))))
        finally:
            video.close()
    except Exception as exc:  # noqa: BLE001 - decoder libraries raise many types; the page says "unreadable"
        log.warning("frame strip: cannot decode %s: %s", path, exc)
        return None
    if any(i not in got for i in indices):
        return None
    return np.stack([got[i] for i in indices]) if indices else None


def _even(n: int, at_most: int) -> list[int]:
    """Up to `at_most` slots of `n`, evenly spread, first and last included."""
    if n <= at_most:
        return list(range(n))
    return sorted({round(i * (n - 1) / (at_most - 1)) for i in range(at_most)})


def _numbers(record: FramesSeen) -> tuple[list[int], list[float]] | None:
    """The record's source frame numbers and their times; None when one is not a number (edited by hand)."""
    try:
        return [int(i) for i in record.indices], [float(t) for t in record.timestamps]
    except (TypeError, ValueError):
        return None
