"""Video and image headers for the plan: frame rate, frame count and size, read without decoding a frame.

A video header comes from the decoder the frame cache uses (PyAV counts the packets, as its decode does), so the plan's
frame indices are the ones the decode will take. Headers are stored as small JSON files under the frame cache, keyed by
the video's content fingerprint (a copied or moved file reuses its header); a second key made of the file's stat
(path, device, inode, size, mtime) skips fingerprinting on the next plan, so a plan of 10,000 cached videos reads
10,000 small files and hashes nothing. Probes run in a thread pool: demuxing is C code that releases the GIL.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from ..errors import SampleError
from ..failure_kinds import FailureKind
from ..frames.decoders import DEFAULT_DECODER, open_video
from ..frames.errors import FrameError
from ..frames.keys import FingerprintMemo
from ..frames.layout import write_text_atomic

PROBE_VERSION = 1  # bump when what a probe records changes


@dataclass(frozen=True)
class VideoHeader:
    fps: float
    total_frames: int
    width: int
    height: int
    fingerprint: str = ""  # content fingerprint (the frame cache's keys are made from it)


def probe_video(path: Path, decoder: str = DEFAULT_DECODER) -> VideoHeader:
    """The header of one video (FrameError when it is missing or unreadable)."""
    try:
        video = open_video(Path(path), decoder)
    except FrameError:
        raise
    except Exception as exc:  # noqa: BLE001 - decoder libraries raise many types
        raise FrameError(FailureKind.DECODE_ERROR,
                         f"{decoder} cannot open {Path(path).name}: {type(exc).__name__}: {exc}") from exc
    try:
        info = video.info
        width, height = info.width, info.height
    finally:
        video.close()
    if not (width and height):  # decord reports no size without decoding: ask the container
        width, height = _container_size(Path(path))
    if info.total_frames <= 0 or info.fps <= 0:
        raise FrameError(FailureKind.DECODE_ERROR, f"{Path(path).name}: the video stream reports no frames")
    return VideoHeader(fps=float(info.fps), total_frames=int(info.total_frames), width=int(width), height=int(height))


def _container_size(path: Path) -> tuple[int, int]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return int(stream.codec_context.width), int(stream.codec_context.height)


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) from an image's header (SampleError when it cannot be read)."""
    from PIL import Image

    if not Path(path).is_file():
        raise FrameError(FailureKind.VIDEO_MISSING, f"image not found: {path}")
    try:
        with Image.open(path) as img:
            width, height = img.size
    except Exception as exc:  # noqa: BLE001 - the run's loader reports it as that sample's failure
        raise FrameError(FailureKind.DECODE_ERROR, f"cannot read image {path}: {type(exc).__name__}: {exc}") from exc
    return height, width


class HeaderStore:
    """Video headers, probed once per content and kept under `root` (the frame cache's folder)."""

    def __init__(self, root: Path, decoder: str = DEFAULT_DECODER, workers: int = 8,
                 fingerprint: Callable[[Path], str] | None = None):
        """`fingerprint`: the frame cache's (FrameCache.fingerprint), so headers and cache entries share one key."""
        self.dir = Path(root) / "probes" / f"v{PROBE_VERSION}-{decoder}"
        self.decoder = decoder
        self.workers = max(1, workers)
        self._fingerprint = fingerprint or FingerprintMemo()
        self.probed = 0  # headers read from videos by this object (the rest came from the store)

    def headers(self, paths: Iterable[Path]) -> dict[Path, VideoHeader | SampleError]:
        """Header (or the error that stops it) of every distinct path: known stats first, then fingerprints, then one
        probe per content not seen before, each step in parallel."""
        # Distinct paths first, kept as the objects given: the caller's questions of one video share one Path, and
        # looking it up by identity skips comparing paths (100,000 questions parsed and compared paths for 1 s).
        unique = list(dict.fromkeys(p if isinstance(p, Path) else Path(p) for p in dict.fromkeys(paths)))
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="probe") as pool:
            known = dict(zip(unique, pool.map(self._known, unique)))
            todo = [p for p, k in known.items() if isinstance(k, str)]  # fingerprints of paths not seen before
            owners = {known[p]: p for p in reversed(todo)}  # one path per content
            probed = dict(zip(owners, pool.map(self._probe, owners.keys(), owners.values())))
        out: dict[Path, VideoHeader | SampleError] = {}
        for path, k in known.items():
            out[path] = probed[k] if isinstance(k, str) else k
            if isinstance(k, str) and isinstance(out[path], VideoHeader):
                self._write(self._stat_file(path), out[path])
        return out

    def _stat_file(self, path: Path) -> Path:
        st = os.stat(path)
        stamp = hashlib.blake2b(f"{path.absolute()}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}"
                                .encode(), digest_size=16).hexdigest()
        return self.dir / f"stat-{stamp}.json"

    def _known(self, path: Path) -> VideoHeader | SampleError | str:
        """The stored header of this exact file, its error, or its fingerprint (to look up or probe by content)."""
        try:
            header = self._read(self._stat_file(path))
        except OSError as exc:
            return FrameError(FailureKind.VIDEO_MISSING, f"video not found: {path} ({exc.strerror})")
        if header is not None:
            return header
        try:
            return self._fingerprint(path)
        except SampleError as exc:
            return exc

    def _probe(self, fingerprint: str, path: Path) -> VideoHeader | SampleError:
        content = self.dir / f"content-{fingerprint}.json"
        header = self._read(content)
        if header is None:
            try:
                header = replace(probe_video(path, self.decoder), fingerprint=fingerprint)
            except SampleError as exc:
                return exc
            self.probed += 1
            self._write(content, header)
        return header

    @staticmethod
    def _read(path: Path) -> VideoHeader | None:
        try:
            return VideoHeader(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):  # absent, or damaged: probe again
            return None

    def _write(self, path: Path, header: VideoHeader) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps(asdict(header)))
        except OSError:  # a read-only cache: the plan still works, it just probes again next time
            pass
