"""The update step (vbench_async.train.update) on a real tiny model, one process: the same batch through different
algorithms and batching settings.

- GSPO and GRPO give different updates once the ratio moves off 1 (several mini-batches: the gspo preset's 4),
  and the same update with one optimizer step per rollout (ratio exactly 1), which is why the preset splits batches;
- micro-batches by token budget, padding-free packing, and log-softmax in chunks change nothing but memory
  and speed: the same update.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from vbench_async.backends.base import Request, VideoInput
from vbench_async.train.config import load_config
from vbench_async.train.fsdp import DistInfo
from vbench_async.train.logger import Sums
from vbench_async.train.policy import Policy, encode
from vbench_async.train.update import Seq, Updater, even_out, micro_batches

CPU = DistInfo(0, 1, 0, torch.device("cpu"))


@pytest.fixture(scope="module")
def setup():
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    backend = HFBackend(str(ensure_tiny_model("tiny-qwen2.5-vl")))
    asyncio.run(backend.start())
    rng = np.random.default_rng(0)
    meta = dict(fps=10.0, duration=2.0, total_num_frames=20, frames_indices=[0, 6, 13, 19], width=56, height=56)
    video = VideoInput(rng.integers(0, 255, (4, 56, 56, 3), dtype=np.uint8), meta, "v")
    encoded = [encode(backend.inputs(Request("v", "What moves?", videos=(video,)))),
               encode(backend.inputs(Request("t", "Which letter comes after A?")))]
    seqs = []
    for p in range(2):
        for j, adv in enumerate([1.0, -1.0, 0.5, -0.5]):
            ids = rng.integers(10, 500, 3 + (j + p) % 4).tolist()
            seqs.append(Seq(p, ids, adv))
    return backend.model, encoded, seqs


def _update(setup, tmp_path: Path, packing: bool = False, rollout_shift: float | None = None, sums: Sums | None = None,
            **settings) -> dict[str, torch.Tensor]:
    """Weights after one update of a fresh copy of the model with `settings` ("section.key": value); with
    `rollout_shift`, every response carries rollout-engine log-probs = the policy's own + the shift."""
    model, encoded, seqs = setup
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text("data: {records: r.json}\ntrain: {prompts_per_step: 2, lr: 1.0, max_grad_norm: 1000}\n")
    cfg = load_config(cfg_path, [f"{k}={v}" for k, v in settings.items()])
    policy = Policy(copy.deepcopy(model).float().train(), packing=packing)
    optim = torch.optim.SGD(policy.parameters(), lr=cfg.train.lr)  # the update is the gradient, not Adam's sign
    updater = Updater(cfg, CPU, policy, None, optim, pad_id=0)
    batch = [copy.copy(s) for s in seqs]
    updater.logprobs(batch, encoded)
    if rollout_shift is not None:
        updater.fill_logprobs(batch, encoded, policy, "rollout_logp")
        for s in batch:
            s.rollout_logp = s.rollout_logp + rollout_shift
    updater.update(batch, encoded, 0, sums if sums is not None else Sums())
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_gspo_and_grpo_update_differently_once_the_ratio_moves(setup, tmp_path):
    grpo = _update(setup, tmp_path, **{"algorithm.name": "grpo", "train.mini_batches": 2})
    gspo = _update(setup, tmp_path, **{"algorithm.name": "gspo", "train.mini_batches": 2})
    start = {f"model.{k}": v.float() for k, v in setup[0].state_dict().items()}
    moved = _max_diff(grpo, start)
    assert moved > 0
    assert _max_diff(grpo, gspo) > 0.01 * moved  # the second mini-batch sees ratios != 1: sequence vs token ratio
    one_grpo = _update(setup, tmp_path, **{"algorithm.name": "grpo", "train.mini_batches": 1})
    one_gspo = _update(setup, tmp_path, **{"algorithm.name": "gspo", "train.mini_batches": 1})
    assert _max_diff(one_grpo, one_gspo) < 1e-5 * moved  # ratio exactly 1: GSPO is GRPO


def test_token_budget_micro_batches_packing_and_chunked_logprobs_give_the_same_update(setup, tmp_path):
    base = _update(setup, tmp_path, **{"train.micro_batch_size": 8})
    budget = _update(setup, tmp_path, **{"train.max_tokens_per_micro_batch": 150, "train.logprob_chunk": 2})
    packed = _update(setup, tmp_path, packing=True, **{"train.max_tokens_per_micro_batch": 150})
    moved = _max_diff(base, {f"model.{k}": v.float() for k, v in setup[0].state_dict().items()})
    assert _max_diff(base, budget) < 1e-4 * moved  # float rounding of different padding, nothing more
    assert _max_diff(base, packed) < 1e-4 * moved
    _, encoded, seqs = setup
    micros = micro_batches(seqs, encoded, 8, 150)
    assert len(micros) > 1 and [s for m in micros for s in m] == seqs
    length = lambda s: len(encoded[s.prompt].input_ids) + len(s.ids)  # noqa: E731
    assert all(len(m) == 1 or len(m) * max(length(s) for s in m) <= 150 for m in micros)
    # Packed, the budget counts real tokens only: one long response no longer makes its neighbours pay its width.
    uneven = [Seq(1, [5] * n, 0.0) for n in (80, 2, 2, 2)]
    budget = sum(length(s) for s in uneven)
    assert len(micro_batches(uneven, encoded, 8, budget)) == 2
    assert micro_batches(uneven, encoded, 8, budget, packed=True) == [uneven]
    packs = micro_batches(seqs, encoded, 8, 150, packed=True)
    assert [s for m in packs for s in m] == seqs
    assert all(len(m) == 1 or sum(length(s) for s in m) <= 150 for m in packs)


def test_truncated_importance_sampling_weights_the_loss_by_the_engine_mismatch_capped(setup, tmp_path):
    """TIS: each token's loss times min(pi_train / pi_rollout, cap); here the same shift on every token, so the
    SGD update scales by that constant."""
    start = {f"model.{k}": v.float() for k, v in setup[0].state_dict().items()}
    off = _update(setup, tmp_path, **{"algorithm.rollout_is": "none"})
    moved = _max_diff(off, start)
    assert _max_diff(_update(setup, tmp_path, rollout_shift=0.0), off) < 1e-5 * moved  # no mismatch: weight 1
    half = _update(setup, tmp_path, rollout_shift=float(np.log(2.0)))  # the engine found the tokens 2x likelier
    assert abs(_max_diff(half, start) / moved - 0.5) < 1e-3
    sums = Sums()
    capped = _update(setup, tmp_path, rollout_shift=-5.0, sums=sums)  # ratio e^5, cut at the cap (2)
    assert abs(_max_diff(capped, start) / moved - 2.0) < 1e-3
    v = sums.values
    assert v["rollout_is/tokens"] > 0 and v["rollout_is/truncated_sum"] == v["rollout_is/tokens"]
    assert abs(v["rollout_is/weight_sum"] / v["rollout_is/tokens"] - 2.0) < 1e-6
    assert abs(v["rollout_is/abs_logp_diff_sum"] / v["rollout_is/tokens"] - 5.0) < 1e-4


def test_a_rank_with_fewer_micro_batches_splits_its_costliest_instead_of_running_idle_passes(setup):
    """Another rank needs 4 micro-batches where this one's 8 sequences fit in 2: this rank cuts its costliest
    micro-batches (at their cost-balanced point) into 4 real ones, in order; none is a zero-weight copy."""
    _, encoded, seqs = setup
    length = lambda s: len(encoded[s.prompt].input_ids) + len(s.ids)  # noqa: E731
    two = micro_batches(seqs, encoded, 4, None)
    four = even_out(two, 4, encoded)
    assert len(four) == 4 and [s for m in four for s in m] == seqs and all(s.trained for m in four for s in m)
    cost = lambda m: len(m) * max(length(s) for s in m)  # noqa: E731
    assert max(map(cost, four)) < max(map(cost, two))  # the forward's padded tokens per pass went down
    packed = even_out([seqs], 3, encoded, packed=True)
    assert len(packed) == 3 and [s for m in packed for s in m] == seqs
    assert {s.prompt for s in packed[0]} != {s.prompt for s in packed[-1]}  # the first cut falls between prompts
    assert all(len({s.prompt for s in m}) == 1 for m in even_out([seqs], 2, encoded))
    # only with fewer sequences than passes is a pass left to pad (the trainer never gets there: equal shares)
    assert even_out([seqs[:2]], 3, encoded) == [[seqs[0]], [seqs[1]]]
