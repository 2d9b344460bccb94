"""One torchrun rank of tests/test_train_mesh.py: the same training on a flat FSDP2 mesh and on a hybrid one.

A small model with the trainer's unit layout (per-layer FSDP units, a vision tower, a root) and row counts that do
not divide the ranks is sharded by the trainer's own `shard` twice, once with `fsdp.shard_size` = the world (plain
FSDP) and once with the given shard size or the default one (HSDP), trained for a few AdamW steps (two
micro-batches each) on each rank's slice of the same global batches, then
  - the full weights of both runs are compared (they must agree to float tolerance);
  - the bucketed sync (`bucketed_full_tensors`, small buckets so several are used and one tensor goes alone, and
    cast to bfloat16) is compared with a per-tensor `full_tensor()` gather of the same model.
Rank 0 writes the figures to the JSON path given as argv[2].
"""

from __future__ import annotations

import json
import sys

import torch
from torch import nn

from vbench_async.train.config import FSDPConfig
from vbench_async.train.fsdp import (
    DistInfo,
    close_distributed,
    full_tensors,
    init_distributed,
    mesh_shape,
    replica_sync,
    shard,
)
from vbench_async.train.sync import SyncStats, bucketed_full_tensors


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.proj(x))


class Tower(nn.Module):
    """A vision tower: its blocks are units of their own, its remaining parameters (the merger) one more."""

    def __init__(self, width: int):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width)])
        self.merger = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.merger(self.blocks[0](x))


class Inner(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.visual = Tower(width)
        self.layers = nn.ModuleList(Block(width) for _ in range(layers))


class Model(nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self, vocab: int = 37, width: int = 12, layers: int = 3):
        super().__init__()
        self.model = Inner(vocab, width, layers)
        self.head = nn.Linear(width, 5)  # 5 rows: uneven over 2 and 4 ranks

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.model.visual(self.model.embed(ids))
        for layer in self.model.layers:
            x = layer(x)
        return self.head(x).float().logsumexp(-1).mean()


class Policy(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids)


def train(info: DistInfo, shard_size: int | None, steps: int) -> Policy:
    torch.manual_seed(0)
    policy = shard(Policy(Model()), FSDPConfig(shard_size=shard_size, timeout_s=60), info, False)
    optim = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        batch = torch.randint(0, 37, (info.world * 2, 6), generator=data)
        mine = batch[info.rank * 2: (info.rank + 1) * 2]
        optim.zero_grad()
        for i, micro in enumerate(mine.split(1)):  # two micro-batches: the replicas all-reduce after the last only
            replica_sync(policy, i == 1)
            (policy(micro) / 2).backward()  # gradients are averaged over all ranks, in either mesh
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optim.step()
    return policy


def main() -> None:
    hybrid_size = None if sys.argv[1] == "auto" else int(sys.argv[1])  # auto: the trainer's default
    out = sys.argv[2]
    info = init_distributed(FSDPConfig(timeout_s=60))
    flat = train(info, info.world, steps=3)
    hybrid = train(info, hybrid_size, steps=3)
    a, b = dict(full_tensors(flat.model)), dict(full_tensors(hybrid.model))
    weight_diff = max((a[k] - b[k]).abs().max().item() for k in a)
    moved = max((a[k] - v).abs().max().item() for k, v in Policy(_fresh()).model.state_dict().items())
    figures = {"mesh": list(mesh_shape(FSDPConfig(shard_size=hybrid_size), info)), "weight_diff": weight_diff,
               "moved": moved}
    for name, policy in (("flat", flat), ("hybrid", hybrid)):
        reference = {k: v.to(torch.bfloat16) for k, v in full_tensors(policy.model)}
        stats = SyncStats()
        synced = list(bucketed_full_tensors(policy.model, torch.bfloat16, 600, stats))  # the embedding goes alone
        figures[name] = {
            "names_in_order": [k for k, _ in synced] == list(reference),
            "max_diff": max((v - reference[k]).abs().max().item() for k, v in synced),
            "dtypes": sorted({str(v.dtype) for _, v in synced}),
            "bytes": stats.bytes, "tensors": stats.tensors, "collectives": stats.collectives,
            "received_bytes": stats.received_bytes,
        }
    if info.main:
        with open(out, "w") as fh:
            json.dump(figures, fh)
    close_distributed()


def _fresh() -> Model:
    torch.manual_seed(0)
    return Model()


if __name__ == "__main__":
    main()
