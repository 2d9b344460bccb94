"""One cache entry = one safetensors file: tensor "frames" (uint8, T x H x W x 3) + JSON metadata in its header.

Frames and metadata live in the same file so they cannot drift apart, and a reader can check one against the
other. Files are written under a temporary name and renamed into place, so readers never see a partial entry
and concurrent writers of the same key (identical content) simply replace each other.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from .video import FORMAT_VERSION, VideoMeta

META_KEY = "vbench_async"
TMP_PREFIX = ".tmp-"
_MAX_HEADER = 64 << 20  # a header larger than this is garbage, not metadata


class CorruptEntry(Exception):
    """A cache file that cannot be trusted (truncated, unparsable, or metadata disagreeing with the frames)."""


def temp_path(final: Path) -> Path:
    """A unique sibling of `final`; the writer's pid in the name lets the parent clean up after a killed worker."""
    return final.with_name(f"{TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}-{final.name}")


def write_entry(path: Path, frames: np.ndarray, meta: VideoMeta) -> int:
    """Atomically write an entry; returns its size in bytes."""
    from safetensors.numpy import save_file

    _check(frames, meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        save_file({"frames": np.ascontiguousarray(frames)}, str(tmp), metadata={META_KEY: json.dumps(meta.to_dict())})
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())  # the rename must not expose a file whose data is still only in memory
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def read_header(path: Path) -> tuple[VideoMeta, tuple[int, ...], int]:
    """(metadata, frames shape, byte offset of the frame data), checked against the file size. No frame I/O."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CorruptEntry("file shorter than a safetensors header")
            size = int.from_bytes(head, "little")
            if not 0 < size <= _MAX_HEADER:
                raise CorruptEntry(f"implausible header length {size}")
            raw = f.read(size)
            if len(raw) < size:
                raise CorruptEntry("header is truncated")
            file_size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise CorruptEntry(f"cannot read: {exc}") from exc
    try:
        header = json.loads(raw)
        tensor = header["frames"]
        meta = VideoMeta.from_dict(json.loads(header["__metadata__"][META_KEY]))
        shape = tuple(int(d) for d in tensor["shape"])
        begin, end = (int(x) for x in tensor["data_offsets"])
        dtype = tensor["dtype"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptEntry(f"unreadable header or metadata: {exc}") from exc
    if dtype != "U8":
        raise CorruptEntry(f"frames are {dtype}, expected U8")
    if end - begin != int(np.prod(shape)) or 8 + size + end != file_size:
        raise CorruptEntry(f"file is {file_size} bytes, header promises {8 + size + end} (truncated?)")
    if meta.format != FORMAT_VERSION:
        raise CorruptEntry(f"entry format {meta.format!r}, this version reads {FORMAT_VERSION!r}")
    _check_shape(shape, meta)
    return meta, shape, 8 + size + begin


def discard_entry(path: Path) -> None:
    """Remove a corrupt entry so it is rebuilt; also when something else (a directory) sits at its name."""
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:
        shutil.rmtree(path, ignore_errors=True)  # inside the cache's own entries folder: never user data


def read_entry(path: Path) -> tuple[np.ndarray, VideoMeta]:
    """Frames and metadata of an entry; CorruptEntry if anything is off."""
    meta, shape, offset = read_header(path)
    frames = np.empty(shape, np.uint8)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            got = f.readinto(memoryview(frames).cast("B"))
    except OSError as exc:
        raise CorruptEntry(f"cannot read frames: {exc}") from exc
    if got != frames.nbytes:
        raise CorruptEntry(f"read {got} of {frames.nbytes} frame bytes")
    return frames, meta


def _check(frames: np.ndarray, meta: VideoMeta) -> None:
    if frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8, got {frames.dtype}")
    try:
        _check_shape(frames.shape, meta)
    except CorruptEntry as exc:
        raise ValueError(str(exc)) from None


def _check_shape(shape: tuple[int, ...], meta: VideoMeta) -> None:
    expected = (meta.num_frames, meta.resized_height, meta.resized_width, 3)
    if tuple(shape) != expected:
        raise CorruptEntry(f"frames have shape {tuple(shape)}, metadata says {expected}")
