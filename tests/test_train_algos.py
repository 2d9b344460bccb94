"""The GRPO-family math (vbench_async.train.algos): advantages, clipped losses, KL estimators, aggregation."""

from __future__ import annotations

import math

import pytest
import torch

from vbench_async.train import algos
from vbench_async.train.config import PRESETS


def test_grpo_advantages_are_standardised_per_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    adv = algos.group_advantages(rewards, "grpo")
    std = torch.tensor([1.0, 0.0, 0.0, 0.0]).std().item()  # unbiased, as torch.std
    assert adv[0, 0].item() == pytest.approx(0.75 / (std + 1e-6), rel=1e-5)
    assert adv[0, 1].item() == pytest.approx(-0.25 / (std + 1e-6), rel=1e-5)
    assert adv[0].sum().item() == pytest.approx(0.0, abs=1e-5)
    assert torch.all(adv[1] == 0)  # identical rewards: no signal


def test_dr_grpo_and_rloo_advantages():
    rewards = torch.tensor([[1.0, 0.0, 0.5]])
    mean = rewards.mean().item()
    assert algos.group_advantages(rewards, "mean")[0].tolist() == pytest.approx([1 - mean, -mean, 0.5 - mean])
    # RLOO: reward minus the mean of the other n-1 samples.
    loo = algos.group_advantages(rewards, "rloo")[0].tolist()
    assert loo == pytest.approx([1.0 - 0.25, 0.0 - 0.75, 0.5 - 0.5])


def test_advantages_reject_bad_shapes_and_kinds():
    with pytest.raises(ValueError, match="n >= 2"):
        algos.group_advantages(torch.tensor([[1.0]]), "grpo")
    with pytest.raises(ValueError, match="unknown advantage"):
        algos.group_advantages(torch.tensor([[1.0, 0.0]]), "ppo")


def test_dynamic_sampling_keeps_only_groups_with_different_rewards():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 0.9]])
    assert algos.varied_groups(rewards).tolist() == [False, False, True]


def _loss(logp, old, adv, clip, mask=None):
    mask = torch.ones_like(logp) if mask is None else mask
    return algos.policy_loss(logp, old, torch.tensor(adv), mask, clip)


def test_ppo_loss_is_the_policy_gradient_when_ratio_is_one():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, stats = _loss(logp, logp.detach(), [2.0], algos.ClipSettings())
    loss.sum().backward()
    assert loss[0].tolist() == pytest.approx([-2.0, -2.0])
    assert logp.grad[0].tolist() == pytest.approx([-2.0, -2.0])  # d(-A * ratio)/dlogp = -A
    assert stats["ratio_mean"].item() == pytest.approx(1.0)
    assert stats["clipfrac_high"].item() == 0


def test_asymmetric_clipping_stops_the_gradient_outside_the_trust_region():
    clip = algos.ClipSettings(clip_low=0.2, clip_high=0.28)
    old = torch.zeros(1, 3)
    # ratios 1.5 (above 1.28), 1.1 (inside), 0.5 (below 0.8)
    logp = torch.log(torch.tensor([[1.5, 1.1, 0.5]])).requires_grad_()
    loss, stats = _loss(logp, old, [1.0], clip)
    loss.sum().backward()
    assert loss[0, 0].item() == pytest.approx(-1.28)  # positive advantage, ratio too high: clipped, no gradient
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[0, 1].item() == pytest.approx(-1.1)
    assert loss[0, 2].item() == pytest.approx(-0.5)  # max(-0.5, -0.8): the unclipped side still pushes up
    assert stats["clipfrac_high"].item() == pytest.approx(1 / 3)
    logp2 = torch.log(torch.tensor([[0.5]])).requires_grad_()
    loss2, stats2 = _loss(logp2, torch.zeros(1, 1), [-1.0], clip)
    assert loss2.item() == pytest.approx(0.8)  # negative advantage, ratio too low: clipped at 1 - 0.2
    assert stats2["clipfrac_low"].item() == 1.0


def test_dual_clip_caps_negative_advantage_losses():
    logp = torch.log(torch.tensor([[10.0]]))
    plain, _ = _loss(logp, torch.zeros(1, 1), [-1.0], algos.ClipSettings())
    dual, _ = _loss(logp, torch.zeros(1, 1), [-1.0], algos.ClipSettings(clip_ratio_c=3.0))
    assert plain.item() == pytest.approx(10.0)
    assert dual.item() == pytest.approx(3.0)


def test_gspo_uses_the_length_normalised_sequence_ratio():
    clip = algos.ClipSettings(ratio="sequence", clip_low=1.0, clip_high=1.0)  # wide: no clipping
    old = torch.zeros(1, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    logp = torch.tensor([[0.2, -0.1, 5.0]], requires_grad=True)  # the padded third token must not count
    loss, stats = _loss(logp, old, [1.0], clip, mask)
    seq_ratio = math.exp((0.2 - 0.1) / 2)
    assert loss[0, 0].item() == pytest.approx(-seq_ratio)
    assert loss[0, 1].item() == pytest.approx(-seq_ratio)
    (loss * mask).sum().div(2).backward()  # seq-mean-token-mean of one sequence
    assert logp.grad[0, :2].tolist() == pytest.approx([-seq_ratio / 2] * 2)  # = d(-s)/dlogp_t, s = exp(mean)
    assert stats["ratio_mean"].item() == pytest.approx(seq_ratio)


def test_kl_estimators():
    logp, ref = torch.tensor([0.0, -1.0]), torch.tensor([-0.5, -1.0])
    assert algos.kl_penalty(logp, ref, "k1").tolist() == pytest.approx([0.5, 0.0])
    k3 = algos.kl_penalty(logp, ref, "k3")
    assert k3[0].item() == pytest.approx(math.exp(-0.5) + 0.5 - 1)
    assert k3[1].item() == 0.0
    assert (algos.kl_penalty(torch.randn(100), torch.randn(100), "k3") >= 0).all()


def test_token_weights_aggregate_the_global_batch():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    loss = torch.ones_like(mask)
    # This micro-batch holds 2 of 4 sequences and 4 of 10 tokens of the global batch.
    assert (algos.token_weights(mask, "token-mean", 4, 10, 8) * loss).sum().item() == pytest.approx(0.4)
    assert (algos.token_weights(mask, "seq-mean-token-mean", 4, 10, 8) * loss).sum().item() == pytest.approx(0.5)
    assert (algos.token_weights(mask, "seq-mean-token-sum", 4, 10, 8) * loss).sum().item() == pytest.approx(1.0)
    assert (algos.token_weights(mask, "seq-mean-token-sum-norm", 4, 10, 8) * loss).sum().item() == \
        pytest.approx(4 / (4 * 8))
    with pytest.raises(ValueError):
        algos.token_weights(mask, "median", 4, 10, 8)


def test_micro_batches_accumulate_to_the_whole_batch_loss():
    torch.manual_seed(0)
    mask = (torch.rand(6, 5) > 0.3).float()
    mask[:, 0] = 1
    per_token = torch.randn(6, 5)
    for agg in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        whole = (algos.token_weights(mask, agg, 6, int(mask.sum()), 5) * per_token).sum()
        parts = sum((algos.token_weights(mask[i:i + 2], agg, 6, int(mask.sum()), 5) * per_token[i:i + 2]).sum()
                    for i in range(0, 6, 2))
        assert parts.item() == pytest.approx(whole.item(), rel=1e-6)


def test_presets_name_the_defining_settings():
    assert PRESETS["dapo"]["clip_high"] > PRESETS["dapo"]["clip_low"]
    assert PRESETS["dapo"]["dynamic_sampling"] is True and PRESETS["dapo"]["loss_agg"] == "token-mean"
    assert PRESETS["dr_grpo"]["advantage"] == "mean" and PRESETS["dr_grpo"]["loss_agg"] == "seq-mean-token-sum-norm"
    assert PRESETS["gspo"]["ratio"] == "sequence"
    assert PRESETS["rloo"]["advantage"] == "rloo"


def test_dapo_overlong_penalty_is_linear_in_the_buffer_before_the_limit():
    assert algos.overlong_penalty(60, max_tokens=100, buffer=20) == 0.0  # before the buffer
    assert algos.overlong_penalty(80, 100, 20) == 0.0
    assert algos.overlong_penalty(90, 100, 20) == pytest.approx(-0.5)
    assert algos.overlong_penalty(100, 100, 20, factor=0.1) == pytest.approx(-0.1)  # at the limit: -factor
    assert algos.overlong_penalty(100, 100, 0) == 0.0  # off
