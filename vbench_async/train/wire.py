"""The wire format of rollout groups moved between ranks (pool.redistribute): no pickle.

A message is a list of `Group`s in two parts: every tensor (the encoded prompt's ids, token types and pixel values,
each response's token ids and rollout log-probs, the advantages) in one safetensors blob, which keeps dtypes and
bytes exactly, and every other field (item, sample, request minus its media, rewards, texts) as JSON with a version.
Layout: 8 bytes little-endian length of the JSON, the JSON (UTF-8), then the safetensors bytes. Decoding builds
the dataclasses field by field from that schema, so a message can never construct anything else.

A request travels without its frames and images (`portable`): the receiver trains on the encoded prompt, which
holds the processed pixels, so the raw media would only cost bytes. Encoding a request that still holds media is
an error rather than a silent multi-megabyte message.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from ..backends.base import Request, SamplingParams
from ..record_io import OutputRecord, RecordError, always
from ..samples import Sample
from .data import TrainItem
from .fsdp import DistInfo
from .policy import Encoded
from .rollout import Group, Response

VERSION = 1
_HEADER = struct.Struct("<Q")


class WireError(ValueError):
    """A message this version cannot read (wrong version, truncated, or fields missing)."""


@dataclass
class WireHeader(OutputRecord):
    """The message's JSON part: its version, then each group's fields (built back by `_group`, field by field)."""

    version: int | None = always()
    groups: list[dict[str, Any]] = always(default_factory=list)


def portable(group: Group) -> Group:
    """The group without its request's frames and images (the receiver needs the encoded prompt, not the media)."""
    return dataclasses.replace(group, request=dataclasses.replace(group.request, videos=(), images=()))


# ------------------------------------------------------------------------------------------------ encode


def encode_groups(groups: list[Group]) -> bytes:
    tensors: dict[str, torch.Tensor] = {}
    meta = WireHeader(version=VERSION, groups=[_group_meta(g, f"{i}.", tensors) for i, g in enumerate(groups)])
    head = json.dumps(meta.to_json(), separators=(",", ":")).encode()
    # safetensors refuses views and shared storage: each tensor goes as its own contiguous CPU copy.
    body = st_save({k: t.detach().to("cpu", copy=True).contiguous() for k, t in tensors.items()})
    return _HEADER.pack(len(head)) + head + body


def _group_meta(g: Group, prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    if g.request.videos or g.request.images:
        raise ValueError(f"group {g.request.request_id} still holds its media: send portable(group)")
    for j, r in enumerate(g.responses):
        tensors[f"{prefix}responses.{j}.token_ids"] = torch.tensor(r.token_ids, dtype=torch.int64)
        if r.rollout_logp is not None:  # Python floats are doubles: float64 keeps them exactly
            tensors[f"{prefix}responses.{j}.rollout_logp"] = torch.tensor(r.rollout_logp, dtype=torch.float64)
    tensors[f"{prefix}advantages"] = torch.tensor(g.advantages, dtype=torch.float64)
    return {
        "item": _item_meta(g.item),
        "request": _request_meta(g.request),
        "responses": [{"text": r.text, "offline": r.offline, "finished": r.finished, "reward": r.reward,
                       "accuracy": r.accuracy, "format": r.format, "logp": r.rollout_logp is not None}
                      for r in g.responses],
        "encoded": _encoded_meta(g.encoded, f"{prefix}encoded.", tensors),
    }


def _item_meta(item: TrainItem) -> dict[str, Any]:
    return {"index": item.index, "sample": item.sample.to_dict(), "prompt": item.prompt,
            "video": None if item.video is None else str(item.video),
            "window": None if item.window is None else list(item.window),
            "images": [str(p) for p in item.images], "offline": list(item.offline)}


def _request_meta(req: Request) -> dict[str, Any]:
    return {"request_id": req.request_id, "prompt": req.prompt, "sampling": req.sampling.to_dict(), "n": req.n,
            "system": req.system}


def _encoded_meta(enc: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    if enc is None:
        return None
    if not isinstance(enc, Encoded):
        raise TypeError(f"group.encoded must be policy.Encoded or None, not {type(enc).__name__}")
    tensors[prefix + "input_ids"] = enc.input_ids
    if enc.token_types is not None:
        tensors[prefix + "token_types"] = enc.token_types
    for key, t in enc.media.items():
        tensors[f"{prefix}media.{key}"] = t
    return {"token_types": enc.token_types is not None, "media": list(enc.media)}  # keys in their order


# ------------------------------------------------------------------------------------------------ decode


def decode_groups(blob: bytes) -> list[Group]:
    if len(blob) < _HEADER.size:
        raise WireError("message shorter than its header")
    (n,) = _HEADER.unpack_from(blob)
    try:
        meta = WireHeader.from_json(json.loads(blob[_HEADER.size: _HEADER.size + n].decode()), "message header")
    except (UnicodeDecodeError, json.JSONDecodeError, RecordError) as exc:
        raise WireError(f"unreadable message header: {exc}") from exc
    if meta.version != VERSION:
        raise WireError(f"wire version {meta.version!r}, this code reads {VERSION}")
    if not meta.has("groups"):
        raise WireError("malformed message: its header lists no groups")
    tensors = st_load(blob[_HEADER.size + n:])
    try:
        return [_group(m, f"{i}.", tensors) for i, m in enumerate(meta.groups)]
    except (KeyError, TypeError) as exc:
        raise WireError(f"malformed group in message: {exc!r}") from exc


def _group(m: dict[str, Any], prefix: str, tensors: dict[str, torch.Tensor]) -> Group:
    responses = []
    for j, r in enumerate(m["responses"]):
        key = f"{prefix}responses.{j}."
        logp = tensors[key + "rollout_logp"].tolist() if r["logp"] else None
        responses.append(Response(tensors[key + "token_ids"].tolist(), r["text"], offline=r["offline"],
                                  finished=r["finished"], reward=r["reward"], accuracy=r["accuracy"],
                                  format=r["format"], rollout_logp=logp))
    return Group(item=_item(m["item"]), request=_request(m["request"]), responses=responses,
                 advantages=tensors[prefix + "advantages"].tolist(),
                 encoded=_encoded(m["encoded"], f"{prefix}encoded.", tensors))


def _item(m: dict[str, Any]) -> TrainItem:
    window = m["window"]
    return TrainItem(index=m["index"], sample=Sample.from_dict(m["sample"]), prompt=m["prompt"],
                     video=None if m["video"] is None else Path(m["video"]),
                     window=None if window is None else (window[0], window[1]),
                     images=tuple(Path(p) for p in m["images"]), offline=tuple(m["offline"]))


def _request(m: dict[str, Any]) -> Request:
    return Request(request_id=m["request_id"], prompt=m["prompt"], sampling=SamplingParams(**m["sampling"]), n=m["n"],
                   system=m.get("system"))


def _encoded(m: dict[str, Any] | None, prefix: str, tensors: dict[str, torch.Tensor]) -> Encoded | None:
    if m is None:
        return None
    return Encoded(input_ids=tensors[prefix + "input_ids"],
                   token_types=tensors[prefix + "token_types"] if m["token_types"] else None,
                   media={k: tensors[f"{prefix}media.{k}"] for k in m["media"]})


# ------------------------------------------------------------------------------------------------ transport


def send_bytes(blob: bytes, dst: int, info: DistInfo) -> None:
    """Length first (one int64), then the bytes as a uint8 tensor, both on the group's device (gloo: CPU, NCCL: GPU)."""
    dist.send(torch.tensor([len(blob)], dtype=torch.int64, device=info.device), dst=dst)
    if blob:
        dist.send(torch.frombuffer(bytearray(blob), dtype=torch.uint8).to(info.device), dst=dst)


def recv_bytes(src: int, info: DistInfo) -> bytes:
    size = torch.zeros(1, dtype=torch.int64, device=info.device)
    dist.recv(size, src=src)
    n = int(size.item())
    if not n:
        return b""
    buf = torch.empty(n, dtype=torch.uint8, device=info.device)
    dist.recv(buf, src=src)
    return buf.cpu().numpy().tobytes()


def send_groups(groups: list[Group], dst: int, info: DistInfo) -> None:
    send_bytes(encode_groups([portable(g) for g in groups]), dst, info)


def recv_groups(src: int, info: DistInfo) -> list[Group]:
    return decode_groups(recv_bytes(src, info))
