"""Decode + sample + resize one video in this process: the work a cache miss costs (run inside a worker)."""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..failure_kinds import FailureKind
from .decoders import DEFAULT_DECODER, open_video
from .errors import FrameError
from .resize import resize_frames
from .spec import FrameSpec, Window, frame_range, normalize_window
from .video import VideoMeta

RESIZE_BATCH = 8  # decoded frames resized together (bounds memory at source resolution)


def check_video_file(path: Path) -> int:
    """Size in bytes of a readable, non-empty regular file; FrameError otherwise."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FrameError(FailureKind.VIDEO_MISSING, f"video not found: {path}") from None
    except OSError as exc:
        raise FrameError(FailureKind.VIDEO_MISSING, f"cannot access video {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise FrameError(FailureKind.VIDEO_MISSING, f"not a regular file: {path}")
    if st.st_size == 0:
        raise FrameError(FailureKind.VIDEO_EMPTY, f"video file is empty (0 bytes): {path}")
    return st.st_size


def decode_video(
    path: Path,
    spec: FrameSpec,
    window: Window | None = None,
    decoder: str = DEFAULT_DECODER,
    threads: int = 1,
) -> tuple[np.ndarray, VideoMeta]:
    """Frames (T, H, W, 3) uint8 and their metadata. Raises FrameError for any bad input."""
    return decode_video_specs(path, [spec], window, decoder, threads)[0]


def decode_video_specs(
    path: Path,
    specs: list[FrameSpec],
    window: Window | None = None,
    decoder: str = DEFAULT_DECODER,
    threads: int = 1,
) -> list[tuple[np.ndarray, VideoMeta]]:
    """The frames of each spec, from one opening and one pass over the video (a frame-budget sweep's 16, 32 and 64
    frames share their decoded source frames). Raises FrameError for any bad input."""
    started = time.perf_counter()
    window = normalize_window(window)
    check_video_file(path)
    try:
        video = open_video(path, decoder, threads)
        try:
            out = _sample(video, path, specs, window, decoder)
        finally:
            video.close()
    except FrameError:
        raise
    except Exception as exc:  # decoder libraries raise many types; all mean "this file did not decode"
        raise FrameError(FailureKind.DECODE_ERROR,
                         f"{decoder} failed on {path.name}: {type(exc).__name__}: {exc}") from exc
    seconds = round(time.perf_counter() - started, 4)
    return [(frames, replace(meta, decode_seconds=seconds)) for frames, meta in out]


@dataclass
class _Target:
    """One spec's output while the video is read: which slots each source frame fills, and frames awaiting resize."""

    spec: FrameSpec
    indices: list[int]
    requested: int
    slots: dict[int, list[int]] = field(default_factory=dict)
    out: np.ndarray | None = None
    steps: tuple[tuple[int, int], ...] = ()  # (height, width) after each resize (FrameSpec.resize_steps)
    pending: list[tuple[int, np.ndarray]] = field(default_factory=list)

    def flush(self) -> None:
        assert self.out is not None
        _resize_into(self.out, self.pending, self.slots, self.steps)
        self.pending.clear()


def _sample(video, path: Path, specs: list[FrameSpec], window: Window | None,
            decoder: str) -> list[tuple[np.ndarray, VideoMeta]]:
    info = video.info
    if info.total_frames <= 0:
        raise FrameError(FailureKind.VIDEO_EMPTY, f"{path.name}: the video stream has no frames")
    first, last, count = frame_range(info.total_frames, info.fps, window)
    targets = []
    for spec in specs:
        plan = spec.frame_count(count, info.fps)
        t = _Target(spec, spec.indices(first, last, plan.n), plan.requested)
        for slot, index in enumerate(t.indices):
            t.slots.setdefault(index, []).append(slot)
        targets.append(t)

    source_size: tuple[int, ...] = ()  # of the first decoded frame, as the metadata reports it
    wanted = sorted({i for t in targets for i in t.slots})
    for index, rgb in video.read(wanted):
        source_size = source_size or rgb.shape[:2]
        for t in targets:
            if index not in t.slots:
                continue
            if t.out is None:
                t.steps = t.spec.resize_steps(source_size[0], source_size[1], len(t.indices))
                t.out = np.empty((len(t.indices), *t.steps[-1], 3), np.uint8)
            t.pending.append((index, rgb))
            if len(t.pending) == RESIZE_BATCH:
                t.flush()
    results = []
    for t in targets:
        if t.out is None:
            raise FrameError(FailureKind.VIDEO_EMPTY, f"{path.name}: no frame could be decoded")
        t.flush()
        results.append((t.out, VideoMeta(
            fps=info.fps,
            total_num_frames=count,
            frames_indices=tuple(t.indices),
            duration=count / info.fps,
            width=int(source_size[1]),
            height=int(source_size[0]),
            resized_height=t.out.shape[1],
            resized_width=t.out.shape[2],
            source_total_frames=info.total_frames,
            source_duration=info.total_frames / info.fps,
            window=window,
            window_frames=(first, last) if window is not None else None,
            requested_frames=t.requested,
            decoder=decoder,
            spec=t.spec.key_fields(),
        )))
    return results


def _resize_into(out: np.ndarray, decoded: list[tuple[int, np.ndarray]], slots: dict[int, list[int]],
                 steps: tuple[tuple[int, int], ...]) -> None:
    if not decoded:
        return
    shapes = {rgb.shape for _, rgb in decoded}
    if len(shapes) == 1:
        resized = _resize_through(np.stack([rgb for _, rgb in decoded]), steps)
    else:  # the stream changed resolution mid-way: resize frame by frame
        resized = np.concatenate([_resize_through(rgb[None], steps) for _, rgb in decoded])
    for (index, _), frame in zip(decoded, resized, strict=True):
        for slot in slots[index]:
            out[slot] = frame


def _resize_through(frames: np.ndarray, steps: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Each resize in turn: a second resize starts from the first one's frames, as the maker's processor does."""
    for height, width in steps:
        frames = resize_frames(frames, height, width)
    return frames
