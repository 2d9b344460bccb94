"""Process group, FSDP2 sharding and weight gathering.

`torchrun` sets RANK / WORLD_SIZE / MASTER_ADDR; a plain `python -m vbench_async.train` runs as a world of one.
Sharding is FSDP2 (`fully_shard`): one unit per decoder layer and per vision block, one for the vision tower's
remaining parameters, and the `Policy` wrapper as root, so all collectives happen inside `Policy.forward`.
The mesh is 1-D (plain FSDP over every rank) or, over several nodes, 2-D (replicate x shard, HSDP): parameters are
sharded over the ranks of a node and replicated across nodes, so the per-micro-batch all-gathers and reduce-scatters
run over NVLink and only the gradient all-reduce between replicas crosses the network (`mesh_shape`).
On GPU, parameters are kept in float32 and computed in bfloat16 (MixedPrecisionPolicy); on CPU everything is float32.

With several ranks only rank 0 reads the checkpoint: every rank builds the model on the meta device (no memory),
shards it, and receives its shard of rank 0's weights by broadcast (`load_sharded`), so a node holds one full copy
of the weights in host memory instead of one per rank, and no GPU holds one (the broadcast sends from host memory,
one tensor at a time).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Iterator

import torch
import torch.distributed as dist
from torch import nn

from ..errors import UserError
from .config import FSDPConfig

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    local_world: int = 1  # ranks on this machine

    @property
    def main(self) -> bool:
        return self.rank == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(cfg: FSDPConfig) -> DistInfo:
    """Join the process group torchrun describes, or form a world of one."""
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    backend = cfg.backend if cfg.backend != "auto" else ("nccl" if cuda else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timedelta(seconds=cfg.timeout_s))
    return DistInfo(rank, world, local_rank, device, int(os.environ.get("LOCAL_WORLD_SIZE", world)))


def close_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _unit_classes(model: nn.Module) -> set[str]:
    """Class names that become their own FSDP unit: HF's `_no_split_modules` (decoder layers, vision blocks)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return names or {type(m).__name__ for m in model.modules()
                     if type(m).__name__.endswith(("DecoderLayer", "VisionBlock"))}


def mesh_shape(cfg: FSDPConfig, info: DistInfo) -> tuple[int, int]:
    """(replicas, ranks per shard group). torchrun numbers ranks node by node, so with a shard group of one node's
    ranks the row-major 2-D mesh puts each shard group inside one node (the inner dimension is the shard one)."""
    size = cfg.shard_size
    if size is None:
        spans_nodes = 1 < info.local_world < info.world and info.world % info.local_world == 0
        size = info.local_world if spans_nodes else info.world
    if size > info.world or info.world % size:
        raise UserError(f"fsdp.shard_size ({size}) must divide the number of processes ({info.world})")
    return info.world // size, size


def build_mesh(cfg: FSDPConfig, info: DistInfo) -> DeviceMesh:
    """The FSDP2 mesh: 1-D over all ranks, or 2-D ("replicate", "shard") for HSDP."""
    from torch.distributed.device_mesh import init_device_mesh

    replicas, size = mesh_shape(cfg, info)
    if replicas == 1:
        return init_device_mesh(info.device.type, (size,), mesh_dim_names=("shard",))
    log.info("hybrid sharding: %d replicas x %d ranks", replicas, size)
    return init_device_mesh(info.device.type, (replicas, size), mesh_dim_names=("replicate", "shard"))


def shard(policy: nn.Module, cfg: FSDPConfig, info: DistInfo, mixed_precision: bool,
          mesh: DeviceMesh | None = None) -> nn.Module:
    """Apply FSDP2 in place and return the policy (its parameters become sharded DTensors). A 2-D mesh makes
    `fully_shard` shard over its inner dimension and replicate over the outer one (HSDP)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    kwargs: dict = {"mesh": mesh if mesh is not None else build_mesh(cfg, info)}
    if mixed_precision:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if cfg.shard == "layer":
        units = _unit_classes(policy.model)
        for module in policy.model.modules():
            if type(module).__name__ in units:
                fully_shard(module, **kwargs)
        fully_shard(policy.model.model.visual, **kwargs)
    fully_shard(policy, **kwargs)
    return policy


def replica_sync(model: nn.Module, now: bool) -> None:
    """Whether the next backward all-reduces gradients between HSDP replicas. Off for every micro-batch of an
    optimizer step but the last: each still reduce-scatters inside its shard group (accumulating the sharded
    gradient), and the last one all-reduces the sum, so the cross-node traffic is once per optimizer step instead of
    once per micro-batch. No effect on a 1-D mesh."""
    setter = getattr(model, "set_requires_all_reduce", None)  # an FSDPModule (after fully_shard)
    if setter is not None:
        setter(now)


def load_sharded(policy: nn.Module, cfg: FSDPConfig, info: DistInfo, mixed_precision: bool,
                 full: nn.Module | None, mesh: DeviceMesh | None = None) -> nn.Module:
    """Shard a policy built on the meta device, then fill it from `full` (the loaded model, on rank 0 only).

    Parameters and persistent buffers arrive through `set_model_state_dict(broadcast_from_rank0=True)`; buffers
    outside the state dict (rotary frequencies) are broadcast one by one."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    shard(policy, cfg, info, mixed_precision, mesh)
    policy.to_empty(device=info.device)
    set_model_state_dict(policy.model, source_state(full, info), options=StateDictOptions(full_state_dict=True,
                                                                       broadcast_from_rank0=True))
    source = dict(full.named_buffers()) if info.main and full is not None else {}
    for name, buf in policy.model.named_buffers():
        if info.main:
            buf.data.copy_(source[name].to(buf.device, buf.dtype))
        if info.world > 1:
            dist.broadcast(buf.data, src=0)
    return policy


def source_state(full: nn.Module | None, info: DistInfo) -> dict[str, torch.Tensor]:
    """What rank 0 broadcasts from: the loaded model's own tensors, where they were loaded (host memory). The
    broadcast moves one tensor at a time to the device (torch's `_broadcast_state_dict`), so rank 0's GPU never holds
    a second full fp32 copy of the model beside its shard (35 GB at 8 B)."""
    return full.state_dict() if info.main and full is not None else {}


def full_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every state-dict entry, gathering shards one at a time (a collective: all ranks)."""
    from torch.distributed.tensor import DTensor

    for name, value in model.state_dict().items():
        yield name, value.full_tensor() if isinstance(value, DTensor) else value


def all_reduce(values: list[float], info: DistInfo, op: str = "sum") -> list[float]:
    """Reduce a list of numbers over ranks (one collective)."""
    t = torch.tensor(values, dtype=torch.float64, device=info.device)
    if info.world > 1:
        dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op])
    return t.tolist()


def barrier(info: DistInfo) -> None:
    if info.world > 1:
        dist.barrier()
