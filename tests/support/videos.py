"""Write small real test videos with PyAV (libx264 ships inside the PyAV wheel; no system ffmpeg needed).

Every frame carries its own index as a row of black/white stripes in its top half (`frame_index` reads it back),
so tests can check which source frames a decoder returned even after the frames were resized.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Iterator

import av
import numpy as np

INDEX_BITS = 14  # up to 16383 frames, enough for 600 s at 25 fps
_LO, _HI = 16, 235


def frame_image(index: int, width: int, height: int, texture: np.ndarray | None = None) -> np.ndarray:
    """RGB uint8 (height, width, 3): index stripes on top, a moving pattern below."""
    img = np.empty((height, width, 3), np.uint8)
    top = height // 2
    cols = np.arange(width) * INDEX_BITS // width  # stripe number of each column
    bits = (index >> (INDEX_BITS - 1 - cols)) & 1  # most significant bit on the left
    img[:top] = np.where(bits, _HI, _LO).astype(np.uint8)[None, :, None]
    if texture is not None:
        shift = (index * 7) % (texture.shape[1] - width)
        img[top:] = texture[: height - top, shift : shift + width]
    else:
        ramp = ((np.arange(width) + index * 4) % 256).astype(np.uint8)
        img[top:] = ramp[None, :, None]
        img[top:, :, 1] = (index * 3) % 256
    return img


def frame_index(frame: np.ndarray) -> int:
    """Read back the index written by `frame_image` from a (possibly resized) RGB frame."""
    height, width = frame.shape[:2]
    row = frame[height // 4].astype(np.int32).mean(axis=1)
    centers = ((np.arange(INDEX_BITS) + 0.5) * width / INDEX_BITS).astype(int)
    value = 0
    for c in centers:
        value = (value << 1) | int(row[c] > 128)
    return value


def write_video(
    path: Path,
    *,
    frames: int | None = None,
    seconds: float | None = None,
    fps: float = 30,
    width: int = 160,
    height: int = 96,
    gop: int = 60,
    textured: bool = False,
    natural: bool = False,
    seed: int = 0,
) -> Path:
    """Encode an H.264 mp4 with `frames` frames (or `seconds` * fps). Width and height must be even.

    `textured` adds a moving random texture (a realistic decoding load); `seed` varies it, so files differ.
    `natural` draws a camera-like scene instead of the index stripes (see `natural_frames`).
    """
    if frames is None:
        if seconds is None:
            raise ValueError("give frames or seconds")
        frames = int(round(seconds * fps))
    texture = None
    if textured:
        rng = np.random.default_rng(seed)
        small = rng.integers(0, 256, (height // 8 + 1, (width * 2) // 8 + 1, 3), dtype=np.uint8)
        texture = np.kron(small, np.ones((8, 8, 1), np.uint8))[:height, : width * 2]
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))  # 29.97 = 30000/1001
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(gop), "crf": "28", "threads": "1"}
        images = (natural_frames(frames, width, height, seed) if natural
                  else (frame_image(i, width, height, texture) for i in range(frames)))
        for image in images:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return path


def natural_frames(count: int, width: int, height: int, seed: int = 0) -> Iterator[np.ndarray]:
    """Frames that compress like camera footage, not like flat colours or white noise: smooth gradients, texture at
    three scales, a slow pan, soft objects moving across, and sensor noise."""
    rng = np.random.default_rng(seed)
    wide = width * 2
    yy, xx = np.mgrid[0:height, 0:wide].astype(np.float32)
    canvas = np.stack([90 + 80 * yy / height, 120 + 40 * np.sin(xx / wide * 6.283), 170 - 60 * yy / height], -1)
    for cell, amplitude in ((32, 25.0), (8, 15.0), (2, 8.0)):  # coarse shapes, mid texture, fine grain
        small = rng.normal(0, amplitude, (height // cell + 2, wide // cell + 2, 3)).astype(np.float32)
        canvas += _upsample(small, cell)[:height, :wide]
    canvas = np.clip(canvas, 0, 255).astype(np.uint8)
    noise = [rng.normal(0, 3, (height, width, 3)).astype(np.int16) for _ in range(8)]
    radius = max(4, height // 10)
    disc = np.clip(1.5 - np.hypot(*np.mgrid[-radius:radius, -radius:radius]) / radius, 0, 1)[..., None]
    objects = [(rng.uniform(0, width), rng.uniform(0, height), rng.uniform(-3, 3), rng.uniform(-2, 2),
                rng.uniform(0, 255, 3)) for _ in range(3)]
    for i in range(count):
        shift = int(i * 1.5) % (wide - width)
        img = canvas[:, shift : shift + width] + noise[i % len(noise)]
        for x0, y0, vx, vy, colour in objects:
            x, y = int(x0 + vx * i) % (width - 2 * radius), int(y0 + vy * i) % (height - 2 * radius)
            patch = img[y : y + 2 * radius, x : x + 2 * radius]
            patch[:] = patch * (1 - disc) + colour * disc
        yield np.clip(img, 0, 255).astype(np.uint8)


def _upsample(small: np.ndarray, cell: int) -> np.ndarray:
    """Smooth (bilinear) enlargement by an integer factor, in numpy alone."""
    ramp = (np.arange(cell, dtype=np.float32) + 0.5) / cell
    rows = small[:-1, None] * (1 - ramp[None, :, None, None]) + small[1:, None] * ramp[None, :, None, None]
    rows = rows.reshape(-1, small.shape[1], 3)
    cols = rows[:, :-1, None] * (1 - ramp[None, None, :, None]) + rows[:, 1:, None] * ramp[None, None, :, None]
    return cols.reshape(rows.shape[0], -1, 3)


def write_audio_only(path: Path, seconds: float = 1.0, rate: int = 16000) -> Path:
    """An mp4 holding one AAC audio stream and no video stream."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        samples = int(seconds * rate)
        tone = (0.1 * np.sin(np.arange(samples) * 2 * np.pi * 440 / rate)).astype(np.float32)
        for start in range(0, samples, 1024):
            chunk = tone[None, start : start + 1024]
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format="fltp", layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def truncate(path: Path, keep_fraction: float = 0.5) -> Path:
    """Cut a file to a fraction of its size in place (a download that stopped half way)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    return path


# What each of `broken_videos`' files must fail with: the frame error kinds a decoder reports.
BROKEN_KINDS = {"missing": "video_missing", "zero": "video_empty", "text": "decode_error", "cut": "decode_error",
                "audio": "no_video_stream"}


def broken_videos(folder: Path) -> dict[str, Path]:
    """One file per way a video can be unusable (names as in BROKEN_KINDS): absent, empty, text, truncated mid-stream,
    audio only."""
    zero = folder / "zero.mp4"
    zero.touch()
    text = folder / "text.mp4"
    text.write_text("not a video, just text\n" * 100)
    return {"missing": folder / "missing.mp4", "zero": zero, "text": text,
            "cut": truncate(write_video(folder / "cut.mp4", frames=60), 0.5),
            "audio": write_audio_only(folder / "audio.mp4")}
