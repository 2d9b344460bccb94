"""How an entry's frames are stored: "raw" uint8 or "zstd" (lossless, the default). Both give back the exact pixels.

"zstd" stores each frame on its own: colour planes G, R-G, B-G (mod 256, exactly reversible), each predicted from
its left, upper and upper-left neighbours (residual = x - left - up + upper_left, mod 256), compressed with zstd
level 1 and a checksum. Camera-like frames shrink to about 0.3-0.45 of raw; perf/frames.py measures the choice
against plain zstd, PNG, lossless WebP and FFV1. Planes are kept transposed (width first), so both prefix sums
that undo the prediction run along a non-contiguous axis, which numpy vectorises. Frames of one entry decode in a
small thread pool: zstd and numpy release the GIL, so a load uses the spare cores without holding the event loop.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

RAW, ZSTD = "raw", "zstd"
CODECS = (RAW, ZSTD)
DEFAULT_CODEC = ZSTD
ZSTD_LEVEL = 1  # measured: level 1 is both the fastest and, after prediction, no larger than levels 3-9
CODEC_ENV = "VBENCH_ASYNC_CACHE_CODEC"

_pool: ThreadPoolExecutor | None = None


class CodecError(Exception):
    """A payload that does not decode to the frames its header promises."""


@dataclass(frozen=True)
class Encoded:
    payload: np.ndarray  # uint8, all frames back to back
    info: dict[str, Any]  # JSON-able: codec, level, per-frame byte offsets


def default_codec() -> str:
    """$VBENCH_ASYNC_CACHE_CODEC, else "zstd"."""
    return check_codec(os.environ.get(CODEC_ENV) or DEFAULT_CODEC)


def check_codec(name: str) -> str:
    if name not in CODECS:
        raise ValueError(f"unknown cache codec {name!r}; choose from {', '.join(CODECS)}")
    return name


def encode(frames: np.ndarray, codec: str) -> Encoded:
    """Compress (T, H, W, 3) uint8 frames."""
    check_codec(codec)
    if codec == RAW:
        return Encoded(np.ascontiguousarray(frames).reshape(-1), {"codec": RAW})
    import zstandard

    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    blobs = [compressor.compress(_predict(frame).tobytes()) for frame in frames]
    offsets = np.cumsum([0] + [len(b) for b in blobs]).tolist()
    payload = np.frombuffer(b"".join(blobs), np.uint8)
    return Encoded(payload, {"codec": ZSTD, "level": ZSTD_LEVEL, "offsets": offsets})


def decode(payload: memoryview | bytes, info: Mapping[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """The frames back, exactly. CodecError if the payload is damaged or disagrees with `info`/`shape`."""
    codec = info.get("codec")
    if codec == RAW:
        frames = np.frombuffer(payload, np.uint8)
        if frames.size != int(np.prod(shape)):
            raise CodecError(f"raw payload has {frames.size} bytes, expected {int(np.prod(shape))}")
        return frames.reshape(shape)  # a view of the caller's buffer: no copy (read_entry passes a fresh one)
    if codec != ZSTD:
        raise CodecError(f"unknown codec {codec!r} (written by a newer version?)")
    try:
        offsets = [int(x) for x in info["offsets"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"bad frame offsets: {exc}") from None
    if len(offsets) != shape[0] + 1 or offsets[0] != 0 or offsets[-1] != len(payload) or offsets != sorted(offsets):
        raise CodecError(f"frame offsets do not cover the {len(payload)}-byte payload in {shape[0]} frames")
    out = np.empty(shape, np.uint8)
    view = memoryview(payload)
    jobs = [(i, view[offsets[i]:offsets[i + 1]]) for i in range(shape[0])]
    if len(jobs) <= 2:
        for i, blob in jobs:
            _unpredict_into(blob, out[i])
    else:
        for _ in _decode_pool().map(lambda job: _unpredict_into(job[1], out[job[0]]), jobs):
            pass
    return out


def _decode_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="frame-codec")
    return _pool


def _predict(frame: np.ndarray) -> np.ndarray:
    """(H, W, 3) -> residual planes (3, W, H)."""
    height, width = frame.shape[:2]
    planes = np.empty((3, height, width), np.uint8)
    green = frame[..., 1]
    planes[0] = green
    np.subtract(frame[..., 0], green, out=planes[1])
    np.subtract(frame[..., 2], green, out=planes[2])
    up = planes.copy()
    up[:, 1:] -= planes[:, :-1]
    residual = up.copy()
    residual[:, :, 1:] -= up[:, :, :-1]
    return np.ascontiguousarray(residual.transpose(0, 2, 1))


def _unpredict_into(blob: memoryview, out: np.ndarray) -> None:
    import zstandard

    height, width = out.shape[:2]
    size = 3 * height * width
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise CodecError(f"zstd: {exc}") from None
    if len(raw) != size:
        raise CodecError(f"a frame decompressed to {len(raw)} bytes, expected {size}")
    residual = np.frombuffer(raw, np.uint8).reshape(3, width, height)
    up = np.cumsum(residual, axis=1, dtype=np.uint8)  # undo "left" (width is axis 1 here)
    planes = np.ascontiguousarray(up.transpose(0, 2, 1))
    np.cumsum(planes, axis=1, dtype=np.uint8, out=planes)  # undo "up"
    planes[1] += planes[0]
    planes[2] += planes[0]
    out[..., 0] = planes[1]
    out[..., 1] = planes[0]
    out[..., 2] = planes[2]
