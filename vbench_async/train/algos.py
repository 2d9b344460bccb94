"""The GRPO family as pure tensor functions: advantages, the clipped policy loss, KL penalties, loss aggregation.

Shapes: rewards (G, n) for G groups of n samples; per-token tensors (B, R) for B responses padded to R tokens, with a
0/1 `mask` of real response tokens. Formulas and the algorithm presets: docs/training.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOG_RATIO_LIMIT = 20.0  # exp() of a larger log-ratio overflows float32; clamp as the reference implementations do


def group_advantages(rewards: torch.Tensor, kind: str, eps: float = 1e-6) -> torch.Tensor:
    """Per-sample advantages from the rewards of each group (row).

    grpo: (r - mean) / (std + eps), std unbiased; mean (Dr. GRPO): r - mean; rloo: r - mean of the other n-1.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (groups, n) with n >= 2, got shape {tuple(rewards.shape)}")
    rewards = rewards.double()  # exact enough that equal rewards give exactly zero advantage
    mean = rewards.mean(dim=1, keepdim=True)
    if kind == "grpo":
        adv = (rewards - mean) / (rewards.std(dim=1, keepdim=True) + eps)
    elif kind == "mean":
        adv = rewards - mean
    elif kind == "rloo":
        n = rewards.shape[1]
        adv = (rewards - mean) * n / (n - 1)
    else:
        raise ValueError(f"unknown advantage estimator {kind!r}")
    return adv.float()


def varied_groups(rewards: torch.Tensor) -> torch.Tensor:
    """DAPO's dynamic-sampling filter: True for groups whose rewards are not all equal (they carry a signal)."""
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) > 0


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp(min=1)
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate of the policy against the reference, from sampled tokens.

    k1: log pi - log pi_ref (unbiased, high variance); k3: exp(ref - logp) - (ref - logp) - 1 (non-negative, low
    variance; Schulman's k3, the "low_var_kl" of verl), clamped to [-10, 10] as the references do.
    """
    delta = logp - ref_logp
    if kind == "k1":
        return delta
    if kind == "k3":
        neg = (-delta).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
        return (neg.exp() - neg - 1).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {kind!r}")


@dataclass(frozen=True)
class ClipSettings:
    ratio: str = "token"  # token: PPO per-token ratio; sequence: GSPO length-normalised sequence ratio
    clip_low: float = 0.2
    clip_high: float = 0.2
    clip_ratio_c: float | None = None  # dual clip: caps the loss of negative-advantage tokens at c * |A|


def truncated_is_weights(train_logp: torch.Tensor, rollout_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling (TIS) against the rollout engine's numerics: per token
    `min(pi_train(y_t) / pi_rollout(y_t), cap)` from the training policy's log-probs at rollout time and the engine's
    own; a constant (no gradient) multiplying the per-token loss. Log-ratios are clamped to +-20 as elsewhere."""
    return torch.exp((train_logp - rollout_logp).detach().clamp(-20.0, 20.0)).clamp(max=cap)


def policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, clip: ClipSettings
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate loss (B, R) and statistics (detached, masked means).

    token:    rho_t = exp(logp_t - old_t)
    sequence: rho_t = sg[s] * exp(logp_t - sg[logp_t]) with s = exp(mean_t(logp_t - old_t)), so the value is the
              sequence ratio and the gradient is s * grad(logp_t) (GSPO-token; equal to GSPO with seq-mean aggregation)
    loss_t = max(-A * rho_t, -A * clip(rho_t, 1 - clip_low, 1 + clip_high)), optionally min(., -A * c) for A < 0.
    """
    adv = advantages.view(-1, 1).to(logp.dtype)
    log_ratio = (logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    if clip.ratio == "sequence":
        seq_log_ratio = masked_mean(log_ratio, mask, dim=1).view(-1, 1)
        ratio = torch.exp(logp - logp.detach() + seq_log_ratio.detach())
    elif clip.ratio == "token":
        ratio = log_ratio.exp()
    else:
        raise ValueError(f"unknown ratio kind {clip.ratio!r}")
    clipped = ratio.clamp(1.0 - clip.clip_low, 1.0 + clip.clip_high)
    unclipped_loss = -adv * ratio
    clipped_loss = -adv * clipped
    loss = torch.maximum(unclipped_loss, clipped_loss)
    if clip.clip_ratio_c is not None:
        dual = torch.minimum(loss, -adv * clip.clip_ratio_c)
        loss = torch.where(adv < 0, dual, loss)
    with torch.no_grad():
        active = (clipped_loss > unclipped_loss).float()
        stats = {
            "clipfrac_high": masked_mean(active * (ratio > 1 + clip.clip_high).float(), mask),
            "clipfrac_low": masked_mean(active * (ratio < 1 - clip.clip_low).float(), mask),
            "ratio_mean": masked_mean(ratio.detach(), mask),
            "approx_kl_old": masked_mean(-log_ratio.detach(), mask),
        }
    return loss, stats


def token_weights(mask: torch.Tensor, agg: str, n_seqs: int, n_tokens: int, max_tokens: int) -> torch.Tensor:
    """Weights w (B, R) with loss = sum(w * loss_t): the aggregation over the WHOLE (global) mini-batch.

    n_seqs / n_tokens are the mini-batch totals over all ranks and micro-batches, so accumulating micro-batches and
    summing over ranks gives exactly the loss of the whole batch.
      token-mean:              1 / n_tokens                    (DAPO: every token counts the same)
      seq-mean-token-mean:     1 / (n_seqs * |y_i|)            (GRPO: each sequence counts the same)
      seq-mean-token-sum:      1 / n_seqs
      seq-mean-token-sum-norm: 1 / (n_seqs * max_tokens)       (Dr. GRPO: a constant, no length bias)
    """
    mask = mask.float()
    if agg == "token-mean":
        return mask / max(n_tokens, 1)
    if agg == "seq-mean-token-mean":
        return mask / mask.sum(dim=1, keepdim=True).clamp(min=1) / max(n_seqs, 1)
    if agg == "seq-mean-token-sum":
        return mask / max(n_seqs, 1)
    if agg == "seq-mean-token-sum-norm":
        return mask / (max(n_seqs, 1) * max_tokens)
    raise ValueError(f"unknown loss aggregation {agg!r}")


def overlong_penalty(length: int, max_tokens: int, buffer: int, factor: float = 1.0) -> float:
    """DAPO's soft overlong punishment, added to the reward of a response of `length` tokens.

    0 up to max_tokens - buffer, then falling linearly to -factor at max_tokens (responses cannot be longer: the
    engine stops there). buffer 0: off.
    """
    if buffer <= 0:
        return 0.0
    start = max_tokens - buffer
    return -factor * min(max(length - start, 0), buffer) / buffer
