"""How an entry's frames are stored: "raw" uint8 or "zstd" (lossless, the default). Both give back the exact pixels.

"zstd" stores chunks of 8 frames: colour planes G, R-G, B-G (mod 256, exactly reversible), each pixel predicted
from its left, upper and upper-left neighbours (residual = x - left - up + upper_left, mod 256), compressed with
zstd level 1 and a checksum. Camera-like frames shrink to about 0.4 of raw; perf/frames.py measures the choice
against plain zstd, PNG, lossless WebP and FFV1. Residuals are laid out width-first, so undoing the prediction is
two loops of whole-row additions. The chunks of one entry decode in a small thread pool: zstd and numpy release
the GIL, so a load uses spare cores, in the loader thread that asked for it, never on the event loop.
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
CHUNK = 8  # frames per zstd frame: chunks decode in parallel, and each row addition covers 8 frames at once
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
    blobs = [compressor.compress(_predict(frames[i:i + CHUNK]).tobytes()) for i in range(0, len(frames), CHUNK)]
    offsets = np.cumsum([0] + [len(b) for b in blobs]).tolist()
    payload = np.frombuffer(b"".join(blobs), np.uint8)
    return Encoded(payload, {"codec": ZSTD, "level": ZSTD_LEVEL, "chunk": CHUNK, "offsets": offsets})


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
        chunk = int(info["chunk"])
        offsets = [int(x) for x in info["offsets"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"bad codec header: {exc}") from None
    chunks = -(-shape[0] // chunk) if chunk > 0 else -1
    if len(offsets) != chunks + 1 or offsets[0] != 0 or offsets[-1] != len(payload) or offsets != sorted(offsets):
        raise CodecError(f"chunk offsets do not cover the {len(payload)}-byte payload in {shape[0]} frames")
    out = np.empty(shape, np.uint8)
    view = memoryview(payload)
    jobs = [(out[i * chunk:(i + 1) * chunk], view[offsets[i]:offsets[i + 1]]) for i in range(chunks)]
    if len(jobs) == 1:
        _unpredict_into(jobs[0][1], jobs[0][0])
    else:
        for _ in _decode_pool().map(lambda job: _unpredict_into(job[1], job[0]), jobs):
            pass
    return out


def _decode_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="frame-codec")
    return _pool


def _predict(frames: np.ndarray) -> np.ndarray:
    """(k, H, W, 3) frames -> residuals laid out (W, k * 3, H)."""
    k, height, width = frames.shape[:3]
    planes = np.empty((k, 3, height, width), np.uint8)
    green = frames[..., 1]
    planes[:, 0] = green
    np.subtract(frames[..., 0], green, out=planes[:, 1])
    np.subtract(frames[..., 2], green, out=planes[:, 2])
    up = planes.copy()
    up[:, :, 1:] -= planes[:, :, :-1]
    residual = up.copy()
    residual[..., 1:] -= up[..., :-1]
    return np.ascontiguousarray(residual.transpose(3, 0, 1, 2))


def _unpredict_into(blob: memoryview, out: np.ndarray) -> None:
    """Decompress one chunk and undo the prediction into `out` (k, H, W, 3).

    Each prefix sum is a loop of whole-row additions over the outermost axis (numpy's cumsum along an axis is a
    scalar loop, several times slower)."""
    import cv2
    import zstandard

    k, height, width = out.shape[:3]
    size = k * 3 * height * width
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise CodecError(f"zstd: {exc}") from None
    if len(raw) != size:
        raise CodecError(f"a chunk decompressed to {len(raw)} bytes, expected {size}")
    residual = np.frombuffer(raw, np.uint8).reshape(width, k * 3, height)
    up = np.empty_like(residual)
    up[0] = residual[0]
    for x in range(1, width):  # undo "left"
        np.add(up[x - 1], residual[x], out=up[x])
    planes = np.empty((k * 3, height, width), np.uint8)
    for c in range(k * 3):  # OpenCV's transpose is an order of magnitude faster than numpy's strided copy
        cv2.transpose(up[:, c, :], dst=planes[c])
    for y in range(1, height):  # undo "up"
        np.add(planes[:, y - 1], planes[:, y], out=planes[:, y])
    planes = planes.reshape(k, 3, height, width)
    planes[:, 1] += planes[:, 0]
    planes[:, 2] += planes[:, 0]
    for f in range(k):
        cv2.merge([planes[f, 1], planes[f, 0], planes[f, 2]], dst=out[f])
