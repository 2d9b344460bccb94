"""One cache entry = one safetensors file: the frames (raw or compressed, codecs.py) + JSON metadata in its header.

    raw   tensor "frames"  (uint8, T x H x W x 3)
    zstd  tensor "payload" (uint8, the compressed frames back to back) + "vbench_async_codec" metadata (codec,
          level, per-frame offsets, frame shape)

Every entry is bound to its key and checksummed (entry_sum.py): "vbench_async_entry" records the key, the video
fingerprint, the spec fields and the window it was made from (the key is recomputed from them) and the payload's
digest; "vbench_async_sum" is the digest of the whole header with that value zeroed. A reader checks the header
digest before it parses a byte of the header, the binding against the key it asked for, and the payload digest
before it serves a frame. An entry without them (an earlier version's) is never served: it is rebuilt.

A read is one open: the header and the frames come from the same file even while another process replaces the
entry (two opens once paired one file's header with another's frames: see docs/frame-cache.md). Files are written
under a temporary sibling name, fsynced, and renamed into place: a rename within one directory is atomic on local
filesystems and on NFS, so readers never see a partial entry and concurrent writers of the same key simply replace
each other with complete files. Temporary names carry the host and pid of the writer, so cleaning up after a killed
worker never touches another machine's file in a shared cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat as stat_mode
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np

from .codecs import RAW, CodecError, decode, encode
from .entry_sum import (
    ENTRY_KEY,
    Binding,
    ChecksumError,
    payload_digest,
    seal_header,
    unseal_header,
)
from .video import FORMAT_VERSION, VideoMeta

META_KEY = "vbench_async"
CODEC_KEY = "vbench_async_codec"
TMP_PREFIX = ".tmp-"
_MAX_HEADER = 64 << 20  # a header larger than this is garbage, not metadata
_CREATE_TRIES = 5  # `cache gc` may remove an empty shard folder between our mkdir and our open


class CorruptEntry(Exception):
    """A cache file that cannot be trusted (truncated, unparsable, checksum or key mismatch, metadata disagreeing
    with the frames). `stat` is the file that was read (None when none could be opened): only that file may be
    discarded, never one another process renamed into place meanwhile."""

    def __init__(self, message: str, stat: os.stat_result | None = None):
        super().__init__(message)
        self.stat = stat


class EntryMissing(CorruptEntry):
    """No file at the entry's name (never written, or removed by gc or an eviction): a miss, not damage."""


class UnverifiedEntry(CorruptEntry):
    """An entry without a checksum or key binding (written by an earlier version): rebuilt, never served."""


@dataclass(frozen=True)
class EntryHeader:
    meta: VideoMeta
    shape: tuple[int, ...]  # of the decoded frames
    codec: str
    codec_info: dict[str, Any]
    data_offset: int  # where the tensor bytes start in the file
    data_size: int
    binding: Binding

    @property
    def raw_bytes(self) -> int:
        return int(np.prod(self.shape))

    @property
    def key(self) -> str:
        return self.binding.key


def writer_tag(pid: int | None = None) -> str:
    """What temporary names written by process `pid` (default: this one) on this host start with."""
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32] or "host"
    return f"{TMP_PREFIX}{host}-{os.getpid() if pid is None else pid}-"


def temp_path(final: Path) -> Path:
    """A unique sibling of `final`, named after the writing host and pid (see `writer_tag`)."""
    return final.with_name(f"{writer_tag()}{uuid.uuid4().hex[:8]}-{final.name}")


def write_entry(path: Path, frames: np.ndarray, meta: VideoMeta, codec: str = RAW, *, video: str,
                key: str | None = None, check: bool = False) -> int:
    """Atomically write the entry of `frames` decoded from the video with fingerprint `video`; returns its size.

    The key is derived from (video, meta.spec, meta.window); `key`, when given, must agree (a caller's bug
    otherwise). `check` decodes the encoded payload in memory before the rename (compact rewrites with it)."""
    _check(frames, meta)
    binding = Binding.of(video, meta.spec, meta.window)
    if key is not None and key != binding.key:
        raise ValueError(f"entry key {key} does not match its video and spec (they give {binding.key})")
    encoded = encode(frames, codec)
    payload = encoded.payload
    if check and not np.array_equal(decode(memoryview(payload), encoded.info, frames.shape), frames):
        raise CodecError(f"{codec} did not give back the frames it was given")
    metadata = {META_KEY: json.dumps(meta.to_dict())}
    if codec == RAW:
        name = "frames"
        payload = np.ascontiguousarray(frames).reshape(-1)
    else:
        name = "payload"
        metadata[CODEC_KEY] = json.dumps({**encoded.info, "shape": list(frames.shape)})
    metadata[ENTRY_KEY] = json.dumps(binding.with_payload(payload_digest(payload.data)).to_dict())
    header = {"__metadata__": metadata,
              name: {"dtype": "U8", "shape": list(frames.shape) if codec == RAW else [payload.size],
                     "data_offsets": [0, payload.size]}}
    head = seal_header(header)
    tmp = _create_temp(path)
    try:
        with open(tmp, "wb") as f:
            f.write(head)
            f.write(payload.data)
            f.flush()
            os.fsync(f.fileno())  # the rename must not expose a file whose data is still only in memory
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return len(head) + payload.size


def _create_temp(path: Path) -> Path:
    """Create an empty temporary sibling of `path`, making its folder (again, if gc removed it meanwhile)."""
    for attempt in range(_CREATE_TRIES):
        tmp = temp_path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # FileExistsError: removed again while it checked
            with open(tmp, "xb"):
                return tmp
        except (FileNotFoundError, FileExistsError):
            if attempt == _CREATE_TRIES - 1:
                raise
    raise AssertionError("unreachable")


class NotRegular(OSError):
    """A FIFO, a device, a socket or a directory where the cache keeps a file: never read (a FIFO would hang)."""


def open_regular(path: Path):  # -> BinaryIO
    """`path` opened for reading if it is a regular file (a symlink to one included); NotRegular otherwise.
    Opened with O_NONBLOCK, so a FIFO in its place returns at once instead of waiting for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat_mode.S_ISREG(st.st_mode):
            raise NotRegular(f"not a regular file ({stat_mode.filemode(st.st_mode)[0]!r}): {path}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: Path) -> str:
    """The text of a small cache file (a record, a label list); NotRegular for anything but a regular file."""
    with open_regular(path) as f:
        return f.read().decode("utf-8")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[BinaryIO]:
    """An entry file opened for reading (a regular file only), its read errors as the cache's: EntryMissing when there
    is no file, CorruptEntry for anything else (an error raised while reading inside the block included)."""
    try:
        with open_regular(path) as f:
            yield f
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise EntryMissing(f"no entry: {exc}") from exc
    except NotRegular as exc:
        raise CorruptEntry(str(exc)) from exc  # no stat: whatever sits there is removed, never read
    except OSError as exc:
        raise CorruptEntry(f"cannot read: {exc}") from exc


def read_header(path: Path, key: str | None = None) -> EntryHeader:
    """The entry's header, checksum-verified and checked against the file size, the frame shape and (when given)
    the key it must belong to. No frame I/O: the payload digest is checked by `read_entry`."""
    with _opened(path) as f:
        st = os.fstat(f.fileno())
        head = f.read(8)
        size = _header_length(head, st)
        raw = f.read(size)
    return _parse(head, raw, st, key)


def load_entry(path: Path, key: str | None = None) -> tuple[np.ndarray, EntryHeader]:
    """Frames and header of an entry read through one open, every checksum verified (decompressed in this thread).
    CorruptEntry (EntryMissing when there is no file) if anything is off."""
    with _opened(path) as f:
        st = os.fstat(f.fileno())
        buf = bytearray(st.st_size)
        view = memoryview(buf)
        got = 0
        while got < st.st_size:
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
    if got != st.st_size:
        raise CorruptEntry(f"read {got} of {st.st_size} bytes", st)
    head = bytes(view[:8])
    size = _header_length(head, st)
    header = _parse(head, bytes(view[8:8 + size]), st, key)
    data = view[header.data_offset:header.data_offset + header.data_size]
    if payload_digest(data) != header.binding.payload:
        raise CorruptEntry("payload checksum mismatch: the frames were damaged", st)
    try:
        frames = decode(data, header.codec_info, header.shape)
    except CodecError as exc:
        raise CorruptEntry(str(exc), st) from None
    return frames, header


def read_entry(path: Path, key: str | None = None) -> tuple[np.ndarray, VideoMeta]:
    """Frames and metadata of an entry (see `load_entry`)."""
    frames, header = load_entry(path, key)
    return frames, header.meta


def discard_entry(path: Path, seen: os.stat_result | None = None) -> None:
    """Remove a corrupt entry so it is rebuilt; also when something else (a directory) sits at its name.

    With `seen` (the file found corrupt), only that very file is removed: an entry another process renamed into
    place since then is a complete, checked file and stays (it is moved aside, compared, and linked back)."""
    if seen is None:
        try:
            path.unlink(missing_ok=True)
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)  # inside the cache's own entries folder: never user data
        return
    try:
        if not _same_file(os.stat(path), seen):
            return
        aside = temp_path(path)
        os.rename(path, aside)
    except FileNotFoundError:
        return
    try:
        if not _same_file(os.stat(aside), seen):  # a writer replaced it between our stat and our rename
            try:
                os.link(aside, path)
            except FileExistsError:
                pass  # an even newer entry is there already
    finally:
        aside.unlink(missing_ok=True)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size, b.st_mtime_ns)


def _header_length(head: bytes, st: os.stat_result) -> int:
    if len(head) < 8:
        raise CorruptEntry("file shorter than a safetensors header", st)
    size = int.from_bytes(head, "little")
    if not 0 < size <= min(_MAX_HEADER, st.st_size - 8):
        raise CorruptEntry(f"implausible header length {size} in a {st.st_size}-byte file", st)
    return size


def _parse(head: bytes, raw: bytes, st: os.stat_result, key: str | None) -> EntryHeader:
    if len(raw) < int.from_bytes(head, "little"):
        raise CorruptEntry("header is truncated", st)
    try:
        unseal_header(head, raw)  # before any parsing: a header that fails it is not read at all
    except ChecksumError as exc:
        kind = UnverifiedEntry if exc.missing else CorruptEntry
        raise kind(str(exc), st) from None
    try:
        header = json.loads(raw)
        metadata = header["__metadata__"]
        meta = VideoMeta.from_dict(json.loads(metadata[META_KEY]))
        binding = Binding.from_dict(json.loads(metadata[ENTRY_KEY]))
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
        raise CorruptEntry(f"unreadable header or metadata: {exc}", st) from exc
    size = len(raw)
    if dtype != "U8":
        raise CorruptEntry(f"frames are {dtype}, expected U8", st)
    if end - begin != stored or 8 + size + end != st.st_size:
        raise CorruptEntry(f"file is {st.st_size} bytes, header promises {8 + size + end} (truncated?)", st)
    if meta.format != FORMAT_VERSION:
        raise CorruptEntry(f"entry format {meta.format!r}, this version reads {FORMAT_VERSION!r}", st)
    problem = binding.disagrees(meta.spec, meta.window, key)
    if problem:
        raise CorruptEntry(problem, st)
    try:
        _check_shape(shape, meta)
    except CorruptEntry as exc:
        raise CorruptEntry(str(exc), st) from None
    return EntryHeader(meta, shape, codec, info, 8 + size + begin, end - begin, binding)


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
