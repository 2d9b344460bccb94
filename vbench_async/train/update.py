"""Log-probs and the policy update over one step's sequences, in micro-batches that every rank runs alike.

Micro-batches hold `train.micro_batch_size` sequences, or as many as fit `train.max_tokens_per_micro_batch` tokens
(what the forward really computes: rows x padded length, or the rows' total length when the policy packs them).
Each forward is a series of FSDP collectives, so every rank must run the same number of them. A rank whose sequences
fit in fewer micro-batches than another's splits its costliest ones (`even_out`) until the counts match, which also
spreads its tokens evenly; every rank holds the same number of sequences (the group pool gives each rank its equal
share of groups, n sequences each), so this always succeeds and no rank runs an idle pass. Only if a rank had fewer
sequences than the count (not reachable from the trainer) would it run a pass on a copy of a sequence with no loss
weight (`Seq.trained = False`; its gradient is exactly zero), counted as `train/padding_passes`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from . import algos
from .config import TrainConfig
from .fsdp import DistInfo, all_reduce, replica_sync
from .logger import Sums
from .policy import Encoded, Policy, collate, forward_batch


@dataclass
class Seq:
    """One response to learn from."""

    prompt: int  # index into the step's encoded prompts
    ids: list[int]
    advantage: float
    trained: bool = True  # False: forward only, no loss (truncated with mask_truncated, or padding for the ranks)
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    rollout_logp: torch.Tensor | None = None  # the rollout engine's log-probs of `ids` (vLLM), for TIS


def micro_batches(seqs: list[Seq], encoded: list[Encoded], size: int, max_tokens: int | None,
                  packed: bool = False) -> list[list[Seq]]:
    """Consecutive runs of sequences (a group's rows stay together and share their pixels): `size` sequences each,
    or with a token budget as many as keep the tokens the forward computes within it (at least one): rows x
    (longest prompt + longest response) when padded, the sum of the rows' lengths when packed."""
    if max_tokens is None:
        return [seqs[i: i + size] for i in range(0, len(seqs), size)]
    out: list[list[Seq]] = []
    current: list[Seq] = []
    width = total = 0
    for s in seqs:
        length = len(encoded[s.prompt].input_ids) + len(s.ids)
        cost = total + length if packed else (len(current) + 1) * max(width, length)
        if current and cost > max_tokens:
            out.append(current)
            current, width, total = [], 0, 0
        current.append(s)
        width, total = max(width, length), total + length
    if current:
        out.append(current)
    return out


def _cost(micro: list[Seq], encoded: list[Encoded], packed: bool) -> int:
    lengths = [len(encoded[s.prompt].input_ids) + len(s.ids) for s in micro]
    return sum(lengths) if packed else len(lengths) * max(lengths)


def even_out(micros: list[list[Seq]], wanted: int, encoded: list[Encoded], packed: bool = False) -> list[list[Seq]]:
    """`micros` split into `wanted` micro-batches (or as many as there are sequences): the costliest micro-batch with
    two rows or more is cut where its two halves cost the most alike (between two prompts' rows if it holds several
    prompts), until the count is reached. Order is kept."""
    out = [list(m) for m in micros]
    while len(out) < wanted:
        splittable = [i for i, m in enumerate(out) if len(m) > 1]
        if not splittable:
            break
        i = max(splittable, key=lambda j: (_cost(out[j], encoded, packed), -j))
        m = out[i]
        # Between two prompts where possible: rows of one prompt in two micro-batches encode its video twice.
        cuts = [c for c in range(1, len(m)) if m[c - 1].prompt != m[c].prompt] or list(range(1, len(m)))
        cut = min(cuts, key=lambda c: (max(_cost(m[:c], encoded, packed), _cost(m[c:], encoded, packed)), c))
        out[i: i + 1] = [m[:cut], m[cut:]]
    return out


class Updater:
    def __init__(self, cfg: TrainConfig, info: DistInfo, policy: Policy, ref: Policy | None,
                 optim: torch.optim.Optimizer, pad_id: int):
        self.cfg, self.info, self.policy, self.ref, self.optim, self.pad = cfg, info, policy, ref, optim, pad_id
        self.padding_passes = 0  # forward passes run only to match another rank's count (none expected)

    @property
    def uses_old_logprobs(self) -> bool:
        return self.cfg.train.mini_batches > 1 or self.cfg.train.ppo_epochs > 1

    def _micros(self, seqs: list[Seq], encoded: list[Encoded]) -> list[list[Seq]]:
        t = self.cfg.train
        micros = micro_batches(seqs, encoded, t.micro_batch_size, t.max_tokens_per_micro_batch,
                               self.policy.packed)
        wanted = int(all_reduce([len(micros)], self.info, "max")[0])
        micros = even_out(micros, wanted, encoded, self.policy.packed)
        self.padding_passes += wanted - len(micros)
        filler = dataclasses.replace(seqs[0], trained=False)
        return micros + [[filler] for _ in range(wanted - len(micros))]

    def _batch(self, micro: list[Seq], encoded: list[Encoded]):
        return collate([encoded[s.prompt] for s in micro], [s.ids for s in micro], self.pad).to(self.info.device)

    def _forward(self, policy: Policy, batch, with_entropy: bool = False):
        return forward_batch(policy, batch, self.cfg.rollout.temperature, with_entropy, self.cfg.train.logprob_chunk)

    @torch.no_grad()
    def fill_logprobs(self, seqs: list[Seq], encoded: list[Encoded], policy: Policy, attr: str) -> None:
        for micro in self._micros(seqs, encoded):
            logp, _, _ = self._forward(policy, self._batch(micro, encoded))
            for row, s in zip(logp, micro):
                setattr(s, attr, row[: len(s.ids)].detach().cpu())

    def logprobs(self, seqs: list[Seq], encoded: list[Encoded]) -> None:
        """Old (several optimizer steps per rollout) and reference (KL penalty) log-probs, where needed."""
        if self.uses_old_logprobs:
            self.fill_logprobs(seqs, encoded, self.policy, "old_logp")
        if self.ref is not None:
            self.fill_logprobs(seqs, encoded, self.ref, "ref_logp")

    @staticmethod
    def _padded(micro: list[Seq], attr: str, like: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(like)
        for i, s in enumerate(micro):
            values = getattr(s, attr)
            out[i, : len(values)] = values.to(out.device, out.dtype)
        return out

    def update(self, seqs: list[Seq], encoded: list[Encoded], step: int, sums: Sums) -> None:
        c, a, info = self.cfg.train, self.cfg.algorithm, self.info
        clip = algos.ClipSettings(a.ratio, a.clip_low, a.clip_high, a.clip_ratio_c)
        use_old = self.uses_old_logprobs
        per = math.ceil(len(seqs) / c.mini_batches)
        # Every rank holds the same number of sequences, so every rank makes the same (non-empty) mini-batches.
        minis = [m for m in (seqs[i * per: (i + 1) * per] for i in range(c.mini_batches)) if m]
        for group in self.optim.param_groups:
            group["lr"] = c.lr * min(1.0, (step + 1) / c.warmup_steps) if c.warmup_steps else c.lr
        for _ in range(c.ppo_epochs):
            for mini in minis:
                trained = [s for s in mini if s.trained]
                n_tokens, n_seqs = all_reduce([sum(len(s.ids) for s in trained), len(trained)], info)
                self.optim.zero_grad(set_to_none=True)
                micros = self._micros(mini, encoded)
                for i, micro in enumerate(micros):
                    replica_sync(self.policy, i == len(micros) - 1)  # HSDP: one cross-node all-reduce per step
                    self._micro_step(micro, encoded, clip, use_old, int(n_seqs), int(n_tokens), sums)
                self._optimizer_step(sums)
        sums.add("train/padding_passes", self.padding_passes)  # this step's, log-prob passes included
        self.padding_passes = 0

    def _micro_step(self, micro: list[Seq], encoded: list[Encoded], clip: algos.ClipSettings, use_old: bool,
                    n_seqs: int, n_tokens: int, sums: Sums) -> None:
        a, info = self.cfg.algorithm, self.info
        batch = self._batch(micro, encoded)
        logp, entropy, zero = self._forward(self.policy, batch, with_entropy=True)
        keep = torch.tensor([float(s.trained) for s in micro], device=logp.device).view(-1, 1)
        mask = batch.response_mask * keep
        old = self._padded(micro, "old_logp", logp) if use_old else logp.detach()
        adv = torch.tensor([s.advantage for s in micro], device=logp.device)
        per_token, stats = algos.policy_loss(logp, old, adv, mask, clip)
        if a.rollout_is != "none":
            per_token = per_token * self._rollout_is(micro, old, mask, sums)
        if self.ref is not None:
            kl = algos.kl_penalty(logp, self._padded(micro, "ref_logp", logp), a.kl)
            per_token = per_token + a.kl_coef * kl
            sums.add("kl_sum", (kl.detach() * mask).sum())
        weights = algos.token_weights(mask, a.loss_agg, n_seqs, n_tokens, self.cfg.rollout.max_tokens)
        loss = (weights * per_token).sum()
        # FSDP averages gradients over ranks; scaling by the world size makes it a global sum. A micro-batch with
        # no trained row still joins the graph (its collectives must run), with weight zero.
        total = loss * info.world + (zero if zero is not None else 0.0) + 0.0 * logp.sum()
        total.backward()
        tokens = mask.sum()
        sums.add("loss_sum", loss.detach())
        sums.add("train/tokens", tokens)
        sums.add("entropy_sum", (entropy * mask).sum())
        for name, value in stats.items():
            sums.add(f"{name}_sum", value * tokens)

    def _rollout_is(self, micro: list[Seq], old: torch.Tensor, mask: torch.Tensor, sums: Sums) -> torch.Tensor:
        """TIS weights of a micro-batch; 1 for rows the engine gave no log-probs for (offline, HF engine)."""
        rollout = old.detach().clone()
        has = torch.zeros_like(mask)
        for i, s in enumerate(micro):
            if s.rollout_logp is not None:
                n = min(len(s.rollout_logp), rollout.shape[1])
                rollout[i, :n] = s.rollout_logp[:n].to(rollout.device, rollout.dtype)
                has[i, :n] = 1.0
        weight = algos.truncated_is_weights(old, rollout, self.cfg.algorithm.rollout_is_cap)
        on = mask * has  # every rank adds the same names, with or without corrected tokens
        sums.add("rollout_is/tokens", on.sum())
        sums.add("rollout_is/weight_sum", (weight * on).sum())
        sums.add("rollout_is/truncated_sum", ((weight >= self.cfg.algorithm.rollout_is_cap).float() * on).sum())
        sums.add("rollout_is/abs_logp_diff_sum", ((old - rollout).abs() * on).sum())
        return weight

    def _optimizer_step(self, sums: Sums) -> None:
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.train.max_grad_norm)
        grad_norm = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
        sums.add("optim/steps", 1)
        sums.add("grad_norm_sum", grad_norm if math.isfinite(grad_norm) else 0.0)
        if math.isfinite(grad_norm):
            self.optim.step()
        else:  # a non-finite gradient would poison the weights: skip this update
            sums.add("optim/skipped", 1)
