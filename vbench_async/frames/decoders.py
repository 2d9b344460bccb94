"""Video decoders behind one small interface: open a file, report fps and frame count, yield chosen frames as RGB.

Frame numbers are ordinals in presentation order, as decord counts them. PyAV builds that ordinal index from the
packets (no decoding) so it can seek to the keyframe before a far-away frame and still know exactly which frame
it got; short gaps are decoded straight through, which is cheaper than a seek.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Protocol

import numpy as np

from ..failure_kinds import FailureKind
from .errors import FrameError

SEEK_GAP = 48  # frames: seek only when the next keyframe is further ahead than this
BATCH = 16  # decord: frames per get_batch call (bounds memory at source resolution)


@dataclass(frozen=True)
class StreamInfo:
    fps: float  # average frame rate of the video stream
    total_frames: int
    width: int = 0  # coded frame size, when the decoder knows it without decoding (0: unknown)
    height: int = 0


class OpenVideo(Protocol):
    info: StreamInfo

    def read(self, indices: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (index, RGB uint8 HxWx3) for each of the sorted, unique `indices`."""

    def close(self) -> None: ...


def _missing_frame(index: int, reached: int, total: int) -> FrameError:
    return FrameError(
        FailureKind.DECODE_ERROR,
        f"stream ended after frame {reached} of {total} while frame {index} was needed (truncated or damaged file?)",
    )


class PyAVVideo:
    name = "pyav"

    def __init__(self, path: Path, threads: int = 1):
        import av

        self._av = av
        self._path = path
        self._threads = threads
        self._container = self._open()
        stream = self._container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if not rate or float(rate) <= 0:
            raise FrameError(FailureKind.DECODE_ERROR, f"{path.name}: the video stream has no frame rate")
        self._pts, self._keys = self._index()
        total = len(self._pts) if self._pts is not None else stream.frames
        self.info = StreamInfo(fps=float(rate), total_frames=int(total), width=int(stream.codec_context.width or 0),
                               height=int(stream.codec_context.height or 0))
        self._container.close()
        self._container = self._open()  # demuxing consumed the file; start again at the beginning

    def _open(self):
        try:
            container = self._av.open(str(self._path))
        except self._av.FFmpegError as exc:
            raise FrameError(FailureKind.DECODE_ERROR, f"cannot open {self._path.name} as a video: {exc}") from exc
        if not container.streams.video:
            container.close()
            raise FrameError(FailureKind.NO_VIDEO_STREAM, f"{self._path.name} has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.thread_count = self._threads
        return container

    def _index(self) -> tuple[np.ndarray | None, list[int]]:
        """Sorted presentation timestamps of all frames, and the ordinals of keyframes (no decoding)."""
        stream = self._container.streams.video[0]
        pts, key_pts = [], []
        try:
            for packet in self._container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue
                if packet.pts is None:
                    return None, []  # no timestamps: read sequentially and count
                pts.append(packet.pts)
                if packet.is_keyframe:
                    key_pts.append(packet.pts)
        except self._av.FFmpegError as exc:
            raise FrameError(FailureKind.DECODE_ERROR, f"cannot read {self._path.name}: {exc}") from exc
        order = np.sort(np.asarray(pts, dtype=np.int64))
        keys = sorted(int(k) for k in np.searchsorted(order, key_pts))
        return order, keys

    def _ordinal(self, frame, previous: int) -> int:
        if self._pts is None or frame.pts is None:
            return previous + 1
        i = int(np.searchsorted(self._pts, frame.pts))
        return min(i, len(self._pts) - 1)

    def read(self, indices: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        stream = self._container.streams.video[0]
        position, frames = -1, None  # ordinal of the last decoded frame; the running decode generator
        for target in indices:
            key = self._keys[bisect.bisect_right(self._keys, target) - 1] if self._keys else 0
            if self._pts is not None and key - position > SEEK_GAP:
                self._container.seek(int(self._pts[key]), stream=stream, backward=True, any_frame=False)
                frames, position = None, key - 1
            if frames is None:
                frames = self._container.decode(stream)
            for frame in frames:
                position = self._ordinal(frame, position)
                if position >= target:
                    break
            else:
                raise _missing_frame(target, position + 1, self.info.total_frames)
            if position != target:
                raise FrameError(FailureKind.DECODE_ERROR, f"{self._path.name}: frame {target} could not be located")
            yield target, frame.to_ndarray(format="rgb24")

    def close(self) -> None:
        self._container.close()


class DecordVideo:
    name = "decord"

    def __init__(self, path: Path, threads: int = 1):
        import decord

        try:
            self._reader = decord.VideoReader(str(path), num_threads=threads)
        except Exception as exc:  # decord raises DECORDError / RuntimeError with ffmpeg's message
            kind = FailureKind.NO_VIDEO_STREAM if "video stream" in str(exc).lower() else FailureKind.DECODE_ERROR
            raise FrameError(kind, f"decord cannot open {path.name}: {str(exc).splitlines()[0]}") from exc
        self.info = StreamInfo(fps=float(self._reader.get_avg_fps()), total_frames=len(self._reader))

    def read(self, indices: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        for start in range(0, len(indices), BATCH):
            chunk = indices[start : start + BATCH]
            batch = self._reader.get_batch(chunk).asnumpy()
            yield from zip(chunk, batch, strict=True)

    def close(self) -> None:
        del self._reader


class OpenCVVideo:
    name = "opencv"

    def __init__(self, path: Path, threads: int = 1):
        import cv2

        self._cv2 = cv2
        cv2.setNumThreads(threads)
        self._cap = cv2.VideoCapture(str(path))
        if not self._cap.isOpened():
            raise FrameError(FailureKind.DECODE_ERROR, f"OpenCV cannot open {path.name} as a video")
        fps = float(self._cap.get(cv2.CAP_PROP_FPS))
        total = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
        if fps <= 0:
            raise FrameError(FailureKind.DECODE_ERROR, f"{path.name}: OpenCV reports no frame rate")
        self.info = StreamInfo(fps=fps, total_frames=total, width=int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
                               height=int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))

    def read(self, indices: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        cv2, position = self._cv2, -1
        for target in indices:
            if target - position > SEEK_GAP * 4:  # OpenCV seeks are slow: only for long jumps
                self._cap.set(cv2.CAP_PROP_POS_FRAMES, target)
                position = target - 1
            while position < target:
                if not self._cap.grab():
                    raise _missing_frame(target, position + 1, self.info.total_frames)
                position += 1
            ok, bgr = self._cap.retrieve()
            if not ok:
                raise _missing_frame(target, position, self.info.total_frames)
            yield target, bgr[:, :, ::-1]

    def close(self) -> None:
        self._cap.release()


DECODERS: dict[str, Callable[[Path, int], OpenVideo]] = {
    "pyav": PyAVVideo,
    "decord": DecordVideo,
    "opencv": OpenCVVideo,
}
# The library each decoder needs (workers import it up front).
DECODER_MODULES = {"pyav": "av", "decord": "decord", "opencv": "cv2"}
# Measured by perf/frames.py (see the closing note of issue 3): PyAV with keyframe seeking is as fast as decord on
# short clips and several times faster on long ones, and it reports a missing video stream precisely.
DEFAULT_DECODER = "pyav"


def open_video(path: Path, decoder: str, threads: int = 1) -> OpenVideo:
    try:
        factory = DECODERS[decoder]
    except KeyError:
        raise ValueError(f"unknown decoder {decoder!r}; choose from {', '.join(DECODERS)}") from None
    return factory(path, threads)
