"""Decode + sample + resize one video in this process: the work a cache miss costs (run inside a worker)."""

from __future__ import annotations

import stat
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from .decoders import DEFAULT_DECODER, open_video
from .errors import DECODE_ERROR, VIDEO_EMPTY, VIDEO_MISSING, FrameError
from .resize import resize_frames
from .spec import FrameSpec, Window, frame_range, normalize_window
from .video import VideoMeta

RESIZE_BATCH = 8  # decoded frames resized together (bounds memory at source resolution)


def check_video_file(path: Path) -> int:
    """Size in bytes of a readable, non-empty regular file; FrameError otherwise."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FrameError(VIDEO_MISSING, f"video not found: {path}") from None
    except OSError as exc:
        raise FrameError(VIDEO_MISSING, f"cannot access video {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise FrameError(VIDEO_MISSING, f"not a regular file: {path}")
    if st.st_size == 0:
        raise FrameError(VIDEO_EMPTY, f"video file is empty (0 bytes): {path}")
    return st.st_size


def decode_video(
    path: Path,
    spec: FrameSpec,
    window: Window | None = None,
    decoder: str = DEFAULT_DECODER,
    threads: int = 1,
) -> tuple[np.ndarray, VideoMeta]:
    """Frames (T, H, W, 3) uint8 and their metadata. Raises FrameError for any bad input."""
    started = time.perf_counter()
    window = normalize_window(window)
    check_video_file(path)
    try:
        video = open_video(path, decoder, threads)
        try:
            frames, meta = _sample(video, path, spec, window, decoder)
        finally:
            video.close()
    except FrameError:
        raise
    except Exception as exc:  # decoder libraries raise many types; all mean "this file did not decode"
        raise FrameError(DECODE_ERROR, f"{decoder} failed on {path.name}: {type(exc).__name__}: {exc}") from exc
    return frames, replace(meta, decode_seconds=round(time.perf_counter() - started, 4))


def _sample(video, path: Path, spec: FrameSpec, window: Window | None, decoder: str) -> tuple[np.ndarray, VideoMeta]:
    info = video.info
    if info.total_frames <= 0:
        raise FrameError(VIDEO_EMPTY, f"{path.name}: the video stream has no frames")
    first, last, count = frame_range(info.total_frames, info.fps, window)
    plan = spec.frame_count(count, info.fps)
    indices = spec.indices(first, last, plan.n)  # the family's selection rule
    slots: dict[int, list[int]] = {}
    for slot, index in enumerate(indices):
        slots.setdefault(index, []).append(slot)

    out: np.ndarray | None = None
    source_size = (0, 0)
    pending: list[tuple[int, np.ndarray]] = []

    def flush() -> None:
        assert out is not None
        _resize_into(out, pending, slots)
        pending.clear()

    for index, rgb in video.read(sorted(slots)):
        if out is None:
            source_size = rgb.shape[:2]
            height, width = spec.frame_size(source_size[0], source_size[1], plan.n)
            out = np.empty((plan.n, height, width, 3), np.uint8)
        pending.append((index, rgb))
        if len(pending) == RESIZE_BATCH:
            flush()
    if out is None:
        raise FrameError(VIDEO_EMPTY, f"{path.name}: no frame could be decoded")
    flush()

    meta = VideoMeta(
        fps=info.fps,
        total_num_frames=count,
        frames_indices=tuple(indices),
        duration=count / info.fps,
        width=int(source_size[1]),
        height=int(source_size[0]),
        resized_height=out.shape[1],
        resized_width=out.shape[2],
        source_total_frames=info.total_frames,
        source_duration=info.total_frames / info.fps,
        window=window,
        window_frames=(first, last) if window is not None else None,
        requested_frames=plan.requested,
        decoder=decoder,
        spec=spec.key_fields(),
    )
    return out, meta


def _resize_into(out: np.ndarray, decoded: list[tuple[int, np.ndarray]], slots: dict[int, list[int]]) -> None:
    if not decoded:
        return
    height, width = out.shape[1:3]
    shapes = {rgb.shape for _, rgb in decoded}
    if len(shapes) == 1:
        resized = resize_frames(np.stack([rgb for _, rgb in decoded]), height, width)
    else:  # the stream changed resolution mid-way: resize frame by frame
        resized = np.concatenate([resize_frames(rgb[None], height, width) for _, rgb in decoded])
    for (index, _), frame in zip(decoded, resized, strict=True):
        for slot in slots[index]:
            out[slot] = frame

