"""The training state moved to host memory while the rollout engine runs (`fsdp.offload_rollout`), and back.

A colocated engine's KV cache gets what the training leaves free on the GPU; during a rollout the training holds its
fp32 parameter shards and Adam moments without touching them (and its last gradients, until the next update zeroes
them). `HostOffload` copies the bytes of every parameter shard and optimizer state tensor of the training device to
host memory (pinned on CUDA, kept for the next rollout) and frees their device storage in place
(`UntypedStorage.resize_(0)`, as FSDP2 frees its unsharded parameters); the gradients are dropped
(`zero_grad(set_to_none=True)`, which the next update does first anyway). `reload` allocates the storages again and
copies the bytes back. The tensor objects never change, so FSDP's parameters, the optimizer's state and every
reference to them stay valid, and the next step is bit for bit the one without offload (tests/test_train_memory.py).
The cost is a copy of those bytes each way per rollout (perf/offload.py measures it; docs/training.md has the
arithmetic at 8 B on 8 x H200).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch
from torch import nn


@dataclass
class OffloadStats:
    bytes: int = 0  # moved each way
    offload_s: float = 0.0
    reload_s: float = 0.0


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def reshard(modules: Iterable[nn.Module]) -> None:
    """Every FSDP2 unit back to its sharded parameters (a forward without backward leaves the root unsharded)."""
    from torch.distributed.fsdp import FSDPModule

    for module in modules:
        for m in module.modules():
            if isinstance(m, FSDPModule):
                m.reshard()


class HostOffload:
    """Parameters of `modules` and the state of `optimizer` on `device`, moved to host memory and back."""

    def __init__(self, modules: list[nn.Module], optimizer: torch.optim.Optimizer | None, device: torch.device):
        self.modules, self.optimizer, self.device = modules, optimizer, device
        self._held: list[tuple[torch.UntypedStorage, torch.Tensor]] = []
        # Host buffers are kept from one rollout to the next: pinned memory is slow to allocate, and fresh pages
        # fault in one by one on the first copy (the host memory is needed at every rollout anyway).
        self._buffers: list[torch.Tensor] = []

    def _storages(self) -> list[torch.UntypedStorage]:
        tensors = [p for m in self.modules for p in m.parameters()]
        if self.optimizer is not None:
            tensors += [v for state in self.optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
        seen: dict[int, torch.UntypedStorage] = {}
        for t in tensors:
            local = _local(t)
            if local.device != self.device:  # AdamW's step counters stay on the CPU beside a GPU model
                continue
            storage = local.untyped_storage()
            if storage.nbytes():  # several views of one storage (a padded FSDP shard) move once
                seen.setdefault(storage.data_ptr(), storage)
        return list(seen.values())

    def offload(self, stats: OffloadStats) -> None:
        started = time.perf_counter()
        cuda = self.device.type == "cuda"
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        reshard(self.modules)
        storages = self._storages()
        del self._buffers[len(storages):]
        for i, storage in enumerate(storages):
            if i == len(self._buffers) or self._buffers[i].numel() != storage.nbytes():
                self._buffers[i:i + 1] = [torch.empty(storage.nbytes(), dtype=torch.uint8, pin_memory=cuda)]
            host = self._buffers[i]
            host.untyped_storage().copy_(storage)
            storage.resize_(0)
            self._held.append((storage, host))
            stats.bytes += host.numel()
        if cuda:
            torch.cuda.empty_cache()  # the freed blocks go back to the driver, where the engine allocates
        stats.offload_s += time.perf_counter() - started

    def reload(self, stats: OffloadStats) -> None:
        started = time.perf_counter()
        for storage, host in self._held:
            storage.resize_(host.numel())
            storage.copy_(host.untyped_storage(), non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the next offload writes into the same pinned buffers
        self._held = []
        stats.reload_s += time.perf_counter() - started

    @contextlib.contextmanager
    def moved(self, stats: OffloadStats) -> Iterator[None]:
        """The training state in host memory for the duration of the block."""
        self.offload(stats)
        try:
            yield
        finally:
            self.reload(stats)
