"""One cache entry = one safetensors file: the frames (raw or compressed, codecs.py) + JSON metadata in its header.

    raw   tensor "frames"  (uint8, T x H x W x 3), as every earlier version wrote it
    zstd  tensor "payload" (uint8, the compressed frames back to back) + "vbench_async_codec" metadata (codec,
          level, per-frame offsets, frame shape)

Frames and metadata live in the same file so they cannot drift apart, and a reader checks one against the other.
Files are written under a temporary sibling name, fsynced, and renamed into place: a rename within one directory
is atomic on local filesystems and on NFS, so readers never see a partial entry and concurrent writers of the
same key simply replace each other with complete files. Temporary names carry the host and pid of the writer, so
cleaning up after a killed worker never touches another machine's file in a shared cache.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .codecs import RAW, CodecError, decode, encode
from .video import FORMAT_VERSION, VideoMeta

META_KEY = "vbench_async"
CODEC_KEY = "vbench_async_codec"
TMP_PREFIX = ".tmp-"
_MAX_HEADER = 64 << 20  # a header larger than this is garbage, not metadata


class CorruptEntry(Exception):
    """A cache file that cannot be trusted (truncated, unparsable, or metadata disagreeing with the frames)."""


@dataclass(frozen=True)
class EntryHeader:
    meta: VideoMeta
    shape: tuple[int, ...]  # of the decoded frames
    codec: str
    codec_info: dict[str, Any]
    data_offset: int  # where the tensor bytes start in the file
    data_size: int

    @property
    def raw_bytes(self) -> int:
        return int(np.prod(self.shape))


def writer_tag(pid: int | None = None) -> str:
    """What temporary names written by process `pid` (default: this one) on this host start with."""
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32] or "host"
    return f"{TMP_PREFIX}{host}-{os.getpid() if pid is None else pid}-"


def temp_path(final: Path) -> Path:
    """A unique sibling of `final`, named after the writing host and pid (see `writer_tag`)."""
    return final.with_name(f"{writer_tag()}{uuid.uuid4().hex[:8]}-{final.name}")


def write_entry(path: Path, frames: np.ndarray, meta: VideoMeta, codec: str = RAW) -> int:
    """Atomically write an entry; returns its size in bytes."""
    from safetensors.numpy import save_file

    _check(frames, meta)
    encoded = encode(frames, codec)
    metadata = {META_KEY: json.dumps(meta.to_dict())}
    if codec == RAW:
        tensors = {"frames": np.ascontiguousarray(frames)}
    else:
        tensors = {"payload": encoded.payload}
        metadata[CODEC_KEY] = json.dumps({**encoded.info, "shape": list(frames.shape)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        save_file(tensors, str(tmp), metadata=metadata)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())  # the rename must not expose a file whose data is still only in memory
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def read_header(path: Path) -> EntryHeader:
    """The entry's header, checked against the file size and the frame shape. No frame I/O."""
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
        metadata = header["__metadata__"]
        meta = VideoMeta.from_dict(json.loads(metadata[META_KEY]))
        if CODEC_KEY in metadata:
            info = json.loads(metadata[CODEC_KEY])
            tensor = header["payload"]
            shape = tuple(int(d) for d in info["shape"])
            codec = str(info["codec"])
        else:
            info, tensor = {"codec": RAW}, header["frames"]
            shape = tuple(int(d) for d in tensor["shape"])
            codec = RAW
        begin, end = (int(x) for x in tensor["data_offsets"])
        dtype = tensor["dtype"]
        stored = int(np.prod(tensor["shape"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptEntry(f"unreadable header or metadata: {exc}") from exc
    if dtype != "U8":
        raise CorruptEntry(f"frames are {dtype}, expected U8")
    if end - begin != stored or 8 + size + end != file_size:
        raise CorruptEntry(f"file is {file_size} bytes, header promises {8 + size + end} (truncated?)")
    if meta.format != FORMAT_VERSION:
        raise CorruptEntry(f"entry format {meta.format!r}, this version reads {FORMAT_VERSION!r}")
    _check_shape(shape, meta)
    return EntryHeader(meta, shape, codec, info, 8 + size + begin, end - begin)


def discard_entry(path: Path) -> None:
    """Remove a corrupt entry so it is rebuilt; also when something else (a directory) sits at its name."""
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:
        shutil.rmtree(path, ignore_errors=True)  # inside the cache's own entries folder: never user data


def read_entry(path: Path) -> tuple[np.ndarray, VideoMeta]:
    """Frames and metadata of an entry (decompressed in this thread); CorruptEntry if anything is off."""
    header = read_header(path)
    data = bytearray(header.data_size)
    try:
        with open(path, "rb") as f:
            f.seek(header.data_offset)
            got = f.readinto(data)
    except OSError as exc:
        raise CorruptEntry(f"cannot read frames: {exc}") from exc
    if got != header.data_size:
        raise CorruptEntry(f"read {got} of {header.data_size} frame bytes")
    try:
        frames = decode(memoryview(data), header.codec_info, header.shape)
    except CodecError as exc:
        raise CorruptEntry(str(exc)) from None
    return frames, header.meta


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
