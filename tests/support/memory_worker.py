"""One torchrun rank of tests/test_train_memory.py, on mesh_worker's small model (FSDP2 units per layer and for the
vision tower, row counts that do not divide 2, so shards are padded):
  - the policy is built on the meta device and filled by `load_sharded` from rank 0's model in host memory;
  - it trains a few AdamW steps twice, once plainly and once with the training state moved to host memory and back
    (`HostOffload`) after every step, as `fsdp.offload_rollout` does around each rollout; after each offload every
    parameter shard and Adam moment has no device storage left, and after each reload the bytes are the ones before.
Each rank writes its figures to the JSON path argv[1].<rank>.
"""

from __future__ import annotations

import json
import sys

import torch
from mesh_worker import Model, Policy

from vbench_async.train.config import FSDPConfig
from vbench_async.train.fsdp import close_distributed, full_tensors, init_distributed, load_sharded
from vbench_async.train.offload import HostOffload, OffloadStats

STEPS = 4


def fresh() -> Model:
    torch.manual_seed(0)
    return Model()


def state(policy: Policy, optim: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {f"model/{k}": v.clone() for k, v in full_tensors(policy.model)}
    names = {p: n for n, p in policy.named_parameters()}
    for p, moments in optim.state.items():
        for key, value in moments.items():
            out[f"optim/{names[p]}/{key}"] = (value.full_tensor() if hasattr(value, "full_tensor") else value).clone()
    return out


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def train(info, offload: bool) -> tuple[dict[str, torch.Tensor], dict]:
    with torch.device("meta"):
        empty = Model()
    policy = load_sharded(Policy(empty), FSDPConfig(timeout_s=60), info, False, fresh() if info.main else None)
    loaded = same({k: v for k, v in full_tensors(policy.model)}, dict(fresh().state_dict()))
    optim = torch.optim.AdamW(policy.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
    moved = HostOffload([policy], optim, info.device)
    stats, freed, restored = OffloadStats(), True, True
    data = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        batch = torch.randint(0, 37, (info.world * 2, 6), generator=data)
        optim.zero_grad(set_to_none=True)
        policy(batch[info.rank * 2: (info.rank + 1) * 2]).backward()
        optim.step()
        if offload:
            before = state(policy, optim)
            with moved.moved(stats):
                tensors = [p.to_local() for p in policy.parameters()] + [
                    v.to_local() for s in optim.state.values() for k, v in s.items() if k != "step"]
                freed &= all(t.untyped_storage().nbytes() == 0 for t in tensors)
                freed &= all(p.grad is None for p in policy.parameters())
            restored &= same(state(policy, optim), before)
    local_bytes = sum(p.to_local().numel() * p.element_size() for p in policy.parameters())
    return state(policy, optim), {"loaded": loaded, "freed": freed, "restored": restored, "bytes": stats.bytes,
                                  "param_bytes": local_bytes}


def main() -> None:
    info = init_distributed(FSDPConfig(timeout_s=60))
    plain, _ = train(info, offload=False)
    offloaded, figures = train(info, offload=True)
    figures["same_training"] = same(plain, offloaded)
    figures["moved"] = max((plain[k] - v).abs().max().item() for k, v in
                           {f"model/{k}": v for k, v in fresh().state_dict().items()}.items())
    with open(f"{sys.argv[1]}.{info.rank}", "w") as fh:
        json.dump(figures, fh)
    close_distributed()


if __name__ == "__main__":
    main()
