"""Weight sync to the rollout engine: full tensors from FSDP shards, cast first, gathered in buckets.

Each rank's engine needs the whole model every step. A parameter sharded on dim 0 over the mesh's shard dimension
(FSDP2's `Shard(0)`, replicated over any other dimension: HSDP) is rebuilt from its shard group alone: the replicas
already hold identical shards, so with a node-local shard group nothing crosses the network. Shards are cast to the
engine's dtype before the gather (bf16 halves the bytes of fp32 master weights), and many parameters share one
all-gather of at most `bucket_bytes` (one collective per bucket instead of one per tensor; a tensor larger than a
bucket goes alone). Tensors of any other layout fall back to `DTensor.full_tensor()`.

Every rank walks the same state dict in the same order and plans the same buckets from global shapes alone, so the
collectives match without any exchange of sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class SyncStats:
    """What one rank's sync did: bytes and tensors handed to the engine, its all-gathers and the bytes they brought
    from other ranks (with a node-local shard group, all of them from inside the node)."""

    bytes: int = 0
    tensors: int = 0
    collectives: int = 0
    received_bytes: int = 0


def chunk_rows(rows: int, parts: int) -> list[int]:
    """Rows of each part when `rows` are split as `torch.chunk` (and FSDP2's Shard(0)) splits them."""
    size = math.ceil(rows / parts) if rows else 0
    return [max(0, min(size, rows - i * size)) for i in range(parts)]


@dataclass
class _Part:
    name: str
    local: torch.Tensor  # this rank's rows, already in the target dtype
    shape: torch.Size  # the full tensor's
    rows: list[int]  # rows held by each rank of the shard group

    @property
    def inner(self) -> int:
        return math.prod(self.shape[1:])

    @property
    def slot(self) -> int:  # elements reserved per rank in the bucket (the largest share: equal-size inputs)
        return max(self.rows) * self.inner


def _shard_dim(value: Any) -> int | None:
    """The mesh dimension a DTensor is sharded on, if its layout is Shard(0) there and Replicate elsewhere."""
    shards = [i for i, p in enumerate(value.placements) if p.is_shard()]
    if value.dim() == 0 or len(shards) != 1 or value.placements[shards[0]].dim != 0:
        return None
    if not all(p.is_replicate() for i, p in enumerate(value.placements) if i != shards[0]):
        return None
    return shards[0]


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype) if t.is_floating_point() else t


def bucketed_full_tensors(model: nn.Module, dtype: torch.dtype, bucket_bytes: int,
                          stats: SyncStats | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor in `dtype`) for every state-dict entry of an FSDP2 model, in state-dict order. A
    collective: every rank iterates it to the end. Tensors of one bucket are yielded after its all-gather."""
    from torch.distributed.tensor import DTensor

    stats = stats if stats is not None else SyncStats()
    bucket: list[_Part] = []
    key: tuple[Any, torch.dtype] | None = None  # (process group, dtype) shared by a bucket's parts

    def flush() -> Iterator[tuple[str, torch.Tensor]]:
        if bucket:
            yield from _gather(bucket, key[0], stats)  # type: ignore[index]
            bucket.clear()

    for name, value in model.state_dict().items():
        dim = _shard_dim(value) if isinstance(value, DTensor) else None
        if dim is None:
            yield from flush()
            if isinstance(value, DTensor):
                stats.collectives += 1
                value = value.full_tensor()
            yield _counted(name, _cast(value, dtype), stats)
            continue
        group = value.device_mesh.get_group(dim)
        local = _cast(value.to_local(), dtype)
        part = _Part(name, local, value.shape, chunk_rows(value.shape[0], value.device_mesh.size(dim)))
        if local.shape[0] != part.rows[value.device_mesh.get_local_rank(dim)]:
            raise RuntimeError(f"{name}: local shard has {local.shape[0]} rows, torch.chunk would give "
                               f"{part.rows[value.device_mesh.get_local_rank(dim)]}")
        size = part.slot * len(part.rows) * local.element_size()
        if bucket and ((group, local.dtype) != key or
                       size + sum(p.slot * len(p.rows) * p.local.element_size() for p in bucket) > bucket_bytes):
            yield from flush()
        key = (group, local.dtype)
        bucket.append(part)
    yield from flush()


def _gather(parts: list[_Part], group: Any, stats: SyncStats) -> Iterator[tuple[str, torch.Tensor]]:
    """One all-gather of the parts' shards (each padded to its largest share), then each full tensor."""
    first = parts[0].local
    ranks = len(parts[0].rows)
    per_rank = sum(p.slot for p in parts)
    send = torch.zeros(per_rank, dtype=first.dtype, device=first.device)
    offset = 0
    for p in parts:
        n = p.local.numel()
        send[offset: offset + n] = p.local.reshape(-1)
        offset += p.slot
    if ranks > 1:
        recv = torch.empty(ranks * per_rank, dtype=first.dtype, device=first.device)
        dist.all_gather_into_tensor(recv, send, group=group)
        stats.collectives += 1
        stats.received_bytes += send.numel() * send.element_size() * (ranks - 1)  # from the other ranks
    else:
        recv = send
    table = recv.view(ranks, per_rank)
    offset = 0
    for p in parts:
        pieces = [table[r, offset: offset + p.rows[r] * p.inner] for r in range(ranks)]
        full = torch.cat(pieces).view(p.shape) if ranks > 1 else pieces[0].view(p.shape)
        offset += p.slot
        yield _counted(p.name, full, stats)


def _counted(name: str, tensor: torch.Tensor, stats: SyncStats) -> tuple[str, torch.Tensor]:
    stats.bytes += tensor.numel() * tensor.element_size()
    stats.tensors += 1
    return name, tensor
