"""Checkpoints that always resume (train/checkpoint.py), in this process: a world of one on gloo, a small module sharded
with FSDP2 per unit as the trainer shards the policy, AdamW (foreach, weight decay) stepped through the trainer's own
`Updater._optimizer_step` (gradient clipping; a non-finite norm skips the step and keeps the gradients).

AdamW creates a parameter's state at its first gradient. Three cases a resume used to refuse (the strict load found
no saved state for a parameter): a parameter with no gradient at step 1, a first step skipped for a non-finite
gradient norm, and a checkpoint saved by the code before the state was completed. Each resumes from its step-1
checkpoint and ends, after steps 2 and 3, bit-identical (weights and Adam state) to the uninterrupted run, which
itself is the same with or without saving. The launched trainer's resume (2 ranks, resharding, a changed
micro-batch size) is in tests/test_train_fsdp.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import free_port
from torch import nn

from vbench_async.errors import UserError
from vbench_async.train import checkpoint
from vbench_async.train.fsdp import DistInfo
from vbench_async.train.logger import Sums
from vbench_async.train.update import Updater

CPU = DistInfo(0, 1, 0, torch.device("cpu"))
STEPS = 3


@pytest.fixture(scope="module", autouse=True)
def world_of_one():
    import torch.distributed as dist

    if dist.is_initialized():  # another test module's group: use it
        yield
        return
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


class Net(nn.Module):
    """`tower` stands for a vision tower or an expert: a step may leave it without a gradient."""

    def __init__(self, extra: bool = False):
        super().__init__()
        self.body = nn.Linear(6, 6)
        self.tower = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)
        if extra:
            self.more = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor, tower: bool) -> torch.Tensor:
        h = self.body(x)
        if tower:
            h = h + self.tower(x)
        return self.head(torch.tanh(h)).pow(2).mean()


def build(extra: bool = False, amsgrad: bool = False) -> tuple[nn.Module, torch.optim.Optimizer]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    net = Net(extra)
    mesh = init_device_mesh("cpu", (1,))
    for unit in (net.body, net.tower):
        fully_shard(unit, mesh=mesh)
    fully_shard(net, mesh=mesh)
    optim = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1, foreach=True, amsgrad=amsgrad)
    return net, optim


def train_step(net: nn.Module, optim: torch.optim.Optimizer, step: int, case: str) -> float:
    """One optimizer step as the trainer takes it; returns the gradient norm (non-finite: skipped)."""
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(step))
    optim.zero_grad(set_to_none=True)
    loss = net(x, tower=not (case == "no_grad" and step == 1))
    if case == "skipped" and step == 1:
        loss = loss * float("nan")
    loss.backward()
    updater = SimpleNamespace(policy=net, optim=optim, cfg=SimpleNamespace(train=SimpleNamespace(max_grad_norm=0.5)))
    sums = Sums()
    Updater._optimizer_step(updater, sums)
    return sums.values["grad_norm_sum"] if not sums.values.get("optim/skipped") else float("nan")


def snapshot(net: nn.Module, optim: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {f"model/{k}": v.full_tensor().clone() for k, v in net.state_dict().items()}
    names = {p: n for n, p in net.named_parameters()}
    for p, state in optim.state.items():
        for key, value in state.items():
            out[f"optim/{names[p]}/{key}"] = (value.full_tensor() if hasattr(value, "full_tensor") else value).clone()
    return out


def assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"differ: {different}"


def run(case: str, out: Path | None = None) -> dict[str, torch.Tensor]:
    """The uninterrupted run (saving after step 1 into `out` when given)."""
    net, optim = build()
    for step in range(1, STEPS + 1):
        train_step(net, optim, step, case)
        if step == 1 and out is not None:
            checkpoint.save_checkpoint(out, net, optim, {"step": step}, CPU, keep=5)
    return snapshot(net, optim)


def resume(path: Path, case: str) -> dict[str, torch.Tensor]:
    net, optim = build()
    assert checkpoint.load_checkpoint(path, net, optim).step == 1
    for step in range(2, STEPS + 1):
        train_step(net, optim, step, case)
    return snapshot(net, optim)


def _saved_optim(path: Path) -> set[str]:
    """The parameters whose optimizer state the checkpoint's files hold."""
    from safetensors import safe_open

    names = set()
    for file in path.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as f:
            names |= {k.split("/")[1] for k in f.keys() if k.startswith("optim/")}
    return names


@pytest.mark.parametrize("case", ["no_grad", "skipped"])
def test_a_step_1_checkpoint_resumes_bit_identically(case, tmp_path):
    reference = run(case)  # never saved
    saved = run(case, tmp_path)  # saving completes the state: nothing changes numerically
    assert_identical(saved, reference)
    path = tmp_path / "checkpoints" / "step-000001"
    assert _saved_optim(path) == {n for n, _ in Net().named_parameters()}  # every parameter's state is in the file
    resumed = resume(path, case)
    assert_identical(resumed, reference)
    state = checkpoint.consolidate(path, "optim/")
    if case == "skipped":  # nothing has been stepped yet: all of it is the state AdamW's first step creates
        assert all(v.count_nonzero() == 0 for v in state.values())
    else:
        assert state["optim/tower.weight/step"].item() == 0 and state["optim/body.weight/step"].item() == 1


@pytest.mark.parametrize("case", ["no_grad", "skipped"])
def test_a_checkpoint_saved_without_the_completed_state_resumes_bit_identically(case, tmp_path, monkeypatch,
                                                                              caplog):
    reference = run(case)
    with monkeypatch.context() as m:  # the code before the state was completed saved what existed
        m.setattr(checkpoint, "complete_adam_state", lambda optimizer: 0)
        run(case, tmp_path)
    path = tmp_path / "checkpoints" / "step-000001"
    assert _saved_optim(path) == ({"body.weight", "body.bias", "head.weight", "head.bias"} if case == "no_grad"
                                  else set())
    with caplog.at_level("INFO", logger="vbench_async.train.checkpoint"):
        resumed = resume(path, case)
    assert_identical(resumed, reference)
    absent = 2 if case == "no_grad" else 6
    assert f"holds no optimizer state for {absent} of 6 parameters" in caplog.text


def test_model_keys_are_strict_and_each_parameter_state_is_read_whole(tmp_path):
    net, optim = build()
    train_step(net, optim, 1, "plain")
    path = checkpoint.save_checkpoint(tmp_path, net, optim, {"step": 1, "model": "net"}, CPU, keep=1)
    other, other_optim = build(extra=True)
    with pytest.raises(UserError, match=r"2 missing \(more.bias, more.weight\), 0 unexpected"):
        checkpoint.load_checkpoint(path, other, other_optim)
    other, other_optim = build(amsgrad=True)  # part of each parameter's state: not an older checkpoint
    with pytest.raises(UserError, match="lacks optim/body.bias/max_exp_avg_sq"):
        checkpoint.load_checkpoint(path, other, other_optim)


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("foreach", [False, True])
def test_completed_state_is_what_the_first_step_creates(foreach, amsgrad):
    """A parameter given step-0 zero state updates exactly as a fresh one on its first real step, and the state has
    the layout torch's own initialisation gives it (keys, dtypes, devices, shapes)."""
    torch.manual_seed(1)
    fresh = nn.Parameter(torch.randn(3, 5))
    completed = nn.Parameter(fresh.detach().clone())
    settings = dict(lr=1e-2, weight_decay=0.1, foreach=foreach, amsgrad=amsgrad)
    opt_fresh, opt_completed = torch.optim.AdamW([fresh], **settings), torch.optim.AdamW([completed], **settings)
    assert checkpoint.complete_adam_state(opt_completed) == 1 and checkpoint.complete_adam_state(opt_completed) == 0
    layout = {k: (v.dtype, v.device, v.shape) for k, v in opt_completed.state[completed].items()}
    for step in range(3):
        grad = torch.randn(3, 5)
        fresh.grad, completed.grad = grad.clone(), grad.clone()
        opt_fresh.step()
        opt_completed.step()
        assert torch.equal(fresh, completed), f"step {step}"
        assert opt_fresh.state[fresh].keys() == opt_completed.state[completed].keys()
        for key, value in opt_fresh.state[fresh].items():
            assert torch.equal(value, opt_completed.state[completed][key]), key
    assert layout == {k: (v.dtype, v.device, v.shape) for k, v in opt_fresh.state[fresh].items()}
    assert math.isclose(float(opt_fresh.state[fresh]["step"]), 3.0)
