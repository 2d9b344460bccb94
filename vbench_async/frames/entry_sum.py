"""What binds an entry to its key, and the checksums over its header and payload (store.py writes and reads them).

The header digest covers every header byte, the 8-byte length included, with the digest's own 32 hex digits read
as zeros; the header holds the payload's digest, so one verified header vouches for the whole file. XXH3-128: the
damage guarded against is accidental (bit rot, a torn copy, an entry copied under another name, a hand edit), and
at about 7 GB/s per core it costs a load a few per cent of a zstd decompression (perf/frames.py measures it). Being
unkeyed, it does not stop someone who rewrites the checksum too; the cache directory's permissions do that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import xxhash

from .keyhash import key_of
from .spec import Window, normalize_window

ENTRY_KEY = "vbench_async_entry"
SUM_KEY = "vbench_async_sum"
_DIGITS = 32
_MARKER = json.dumps(SUM_KEY).encode() + b':"'  # how the compact JSON header spells the start of the digest


class ChecksumError(Exception):
    """The header's digest is absent (`missing`: an earlier version's entry) or does not match."""

    def __init__(self, message: str, missing: bool = False):
        super().__init__(message)
        self.missing = missing


def payload_digest(data: memoryview | bytes) -> str:
    return xxhash.xxh3_128(data).hexdigest()


def seal_header(header: dict[str, Any]) -> bytes:
    """The 8-byte length and the padded compact JSON of `header`, with its digest filled in."""
    metadata = {**header["__metadata__"], SUM_KEY: "0" * _DIGITS}
    raw = json.dumps({**header, "__metadata__": metadata}, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors aligns the tensor data to 8 bytes
    head = len(raw).to_bytes(8, "little")
    at = _digest_at(raw)
    digest = _digest(head, raw, at).encode()
    return head + raw[:at] + digest + raw[at + _DIGITS:]


def unseal_header(head: bytes, raw: bytes) -> None:
    """ChecksumError unless `raw` (the header bytes after the 8-byte length `head`) carries its own digest."""
    at = _digest_at(raw)
    if _digest(head, raw, at).encode() != raw[at:at + _DIGITS]:
        raise ChecksumError("header checksum mismatch: the header was edited or damaged")


def _digest_at(raw: bytes) -> int:
    start = raw.find(_MARKER)
    if start < 0:
        raise ChecksumError("no checksum (an entry of an earlier version, or a damaged header)", missing=True)
    if raw.find(_MARKER, start + 1) >= 0:
        raise ChecksumError("two checksums in one header")
    at = start + len(_MARKER)
    if raw[at + _DIGITS:at + _DIGITS + 1] != b'"':
        raise ChecksumError("malformed checksum")
    return at


def _digest(head: bytes, raw: bytes, at: int) -> str:
    h = xxhash.xxh3_128(head)
    h.update(raw[:at])
    h.update(b"0" * _DIGITS)
    h.update(raw[at + _DIGITS:])
    return h.hexdigest()


@dataclass(frozen=True)
class Binding:
    """The key an entry belongs to and what it was made from; the key is a function of the other three."""

    key: str
    video: str  # content fingerprint of the source video
    spec: Mapping[str, Any] = field(default_factory=dict)  # FrameSpec.key_fields()
    window: Window | None = None  # normalized
    payload: str = ""  # digest of the tensor bytes

    @classmethod
    def of(cls, video: str, spec: Mapping[str, Any], window: Window | None) -> Binding:
        window = normalize_window(tuple(window) if window is not None else None)
        return cls(key_of(video, dict(spec), window), video, dict(spec), window)

    def with_payload(self, digest: str) -> Binding:
        return replace(self, payload=digest)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "video": self.video, "spec": dict(self.spec),
                "window": list(self.window) if self.window is not None else None, "payload": self.payload}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Binding:
        window = d.get("window")
        return cls(str(d["key"]), str(d["video"]), dict(d["spec"]),
                   tuple(window) if window is not None else None, str(d["payload"]))

    def disagrees(self, spec: Mapping[str, Any], window: Window | None, key: str | None) -> str | None:
        """Why this binding does not hold for an entry whose metadata says (spec, window), looked up as `key`."""
        if key_of(self.video, dict(self.spec), self.window) != self.key:
            return "the entry's key does not match the video fingerprint and spec it records"
        if dict(spec) != dict(self.spec) or _window(window) != self.window:
            return "the entry's metadata does not match the spec and window it is bound to"
        if key is not None and key != self.key:
            return f"the entry belongs to key {self.key}, not {key} (copied or moved from another entry?)"
        return None


def _window(window: Window | None) -> Window | None:
    try:
        return normalize_window(tuple(window) if window is not None else None)
    except Exception:  # a window no decode could have written: disagrees with any binding
        return (-1.0, None)
