"""The training loop, in one readable place.

Each step, on every rank:
  1. sync     the FSDP weights into the rollout engine (a gathered full state dict)
  2. rollout  this rank's share of the prompts, n samples each (cached frames, the evaluation's `Request`), offline
              responses mixed in, rewards from the scorer library; DAPO refills groups whose rewards are all equal
  3. logprob  old / reference log-probs when the algorithm needs them
  4. update   clipped policy loss aggregated over the global batch; one optimizer step per mini-batch
  5. log      metrics reduced over ranks -> metrics.jsonl; checkpoints, export and validation at their cadence
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from ..backends.base import SamplingParams
from ..errors import UserError
from . import algos
from .checkpoint import export_hf, find_resume, gather_for_rank0, load_checkpoint, save_checkpoint
from .config import TrainConfig
from .data import DataOrder, MediaSource, frame_spec, load_items, rank_slice
from .fsdp import all_reduce, barrier, close_distributed, full_tensors, init_distributed, shard
from .logger import MetricsLogger, Sums, step_metrics
from .policy import Encoded, Policy, collate, encode, forward_batch
from .rollout import Group, make_responses, mix_offline, rollout_seed, score

log = logging.getLogger(__name__)


@dataclass
class Seq:
    """One response to learn from."""

    prompt: int  # index into the step's encoded prompts
    ids: list[int]
    advantage: float
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None


class Trainer:
    def __init__(self, cfg: TrainConfig):
        from .. import models

        self.cfg = cfg
        self.info = init_distributed(cfg.fsdp)
        if cfg.train.prompts_per_step % self.info.world:
            raise UserError(f"train.prompts_per_step ({cfg.train.prompts_per_step}) must be a multiple of the "
                            f"number of processes ({self.info.world})")
        self.out = Path(cfg.output_dir)
        torch.manual_seed(cfg.seed)
        model = models.resolve(cfg.model)
        self.model_dir = model.path
        self.items = load_items(cfg.data)
        self.media = MediaSource(frame_spec(cfg.data, model.family), cfg.data.frame_source, cfg.data.cache_dir,
                                 cfg.data.decode_workers)
        report = self.media.prepare(self.items, self.info.rank, self.info.world,
                                    progress=self.info.main and cfg.logging.progress)
        if report is not None:
            log.info("frame cache (rank %d): %s", self.info.rank, report.summary())
        barrier(self.info)
        self.order = DataOrder(len(self.items), cfg.seed, cfg.data.shuffle)
        gpu = self.info.device.type == "cuda"
        self.mixed = gpu and cfg.train.dtype == "auto"
        self.load_dtype = torch.bfloat16 if cfg.train.dtype == "bfloat16" else torch.float32
        self.policy = self._build_policy(trainable=True)
        self.ref = self._build_policy(trainable=False) if cfg.algorithm.kl != "none" else None
        self.optim = torch.optim.AdamW([p for p in self.policy.parameters() if p.requires_grad], lr=cfg.train.lr,
                                       betas=tuple(cfg.train.betas), weight_decay=cfg.train.weight_decay,
                                       foreach=True)  # one kernel per op over all (sharded) params, also on CPU
        self.rollout = self._build_rollout(gpu)
        self.tokenizer = self.rollout.processor.tokenizer
        self.step, self._synced = 0, True  # the rollout engine starts from the same checkpoint files
        resume = find_resume(self.out, cfg.checkpoint.resume)
        if resume is not None:
            self._resume(resume)
        self.logger = MetricsLogger(self.out, cfg.logging, self.info.main, cfg.train.steps, self.step,
                                    cfg.to_dict())
        if self.info.main:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    # -- setup ------------------------------------------------------------------------------------------------------
    def _build_policy(self, trainable: bool) -> Policy:
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(self.model_dir, dtype=self.load_dtype)
        if trainable:
            if self.cfg.train.gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if self.cfg.train.freeze_vision:
                model.model.visual.requires_grad_(False)
            model.train()  # Qwen-VL has no dropout; train mode is what enables gradient checkpointing
        else:
            model.requires_grad_(False).eval()
        policy = Policy(model.to(self.info.device))
        return shard(policy, self.cfg.fsdp, self.info, self.mixed)

    def _build_rollout(self, gpu: bool):
        engine = self.cfg.rollout.engine
        if engine == "auto":
            engine = "vllm" if gpu else "hf"
        if engine == "vllm":
            from .vllm_rollout import VLLMRollout

            return VLLMRollout(self.model_dir, self.cfg.rollout, seed=self.cfg.seed + self.info.rank,
                               world=self.info.world)
        from .rollout import HFRollout

        return HFRollout(self.model_dir, self.info.device)

    def _resume(self, path: Path) -> None:
        state = load_checkpoint(path, self.policy.model, self.optim)
        if state.get("config_hash") != self.cfg.hash():
            raise UserError(f"cannot resume from {path}: it was trained with a different configuration (only "
                            "train.steps, logging, checkpoint and validation may change); use a new output_dir or "
                            "checkpoint.resume: none")
        self.step, self.order.consumed, self._synced = int(state["step"]), int(state["consumed"]), False
        log.info("resumed from %s at step %d", path, self.step)

    # -- the loop ---------------------------------------------------------------------------------------------------
    def fit(self) -> dict[str, float]:
        cfg, last = self.cfg, {}
        saved_at = self.step
        try:
            while self.step < cfg.train.steps:
                metrics = self.train_step()
                self.step += 1
                if cfg.checkpoint.every and self.step % cfg.checkpoint.every == 0:
                    self.save()
                    saved_at = self.step
                if cfg.validation.every and self.step % cfg.validation.every == 0:
                    metrics.update(self.run_validation())
                self.logger.log(self.step, metrics)
                last = metrics
            if saved_at != self.step:
                self.save()
            if cfg.checkpoint.export:
                self.export(self.out / "export")
        finally:
            self.logger.close()
            self.media.close()
        return last

    def train_step(self) -> dict[str, float]:
        times = {"start": time.perf_counter()}
        if not self._synced:
            self.rollout.sync(full_tensors(self.policy.model))
        self._synced = False
        times["sync"] = time.perf_counter()
        groups, sums = self._collect()
        times["rollout"] = time.perf_counter()
        for g in groups:
            g.advantages = algos.group_advantages(torch.tensor([g.rewards]), self.cfg.algorithm.advantage,
                                                  self.cfg.algorithm.std_eps)[0].tolist()
        encoded = [encode(self.rollout.inputs(g.request)) for g in groups]
        seqs = [Seq(i, r.token_ids, a) for i, g in enumerate(groups) for r, a in zip(g.responses, g.advantages)]
        if self.cfg.train.mini_batches > 1 or self.cfg.train.ppo_epochs > 1:
            self._fill_logprobs(seqs, encoded, self.policy, "old_logp")
        if self.ref is not None:
            self._fill_logprobs(seqs, encoded, self.ref, "ref_logp")
        times["logprob"] = time.perf_counter()
        if seqs:  # the group count is the minimum over ranks: every rank has sequences, or none has
            self._update(seqs, encoded, sums)
        times["update"] = time.perf_counter()
        self._log_samples(groups)
        return self._metrics(sums, times)

    # -- rollouts ---------------------------------------------------------------------------------------------------
    def _collect(self) -> tuple[list[Group], Sums]:
        c = self.cfg
        per_rank = c.train.prompts_per_step // self.info.world
        sums = Sums("rollout/responses", "reward/sum", "reward/accuracy_sum", "reward/format_sum", "response/tokens",
                    "rollout/online", "reward/online_sum",
                    "response/finished", "rollout/groups", "rollout/dropped", "rollout/failed", "rollout/offline",
                    "time/media_s", "frames/decoded")
        kept: list[Group] = []
        rounds = 1 + (c.algorithm.max_sampling_tries if c.algorithm.dynamic_sampling else 0)
        for round_ in range(rounds):
            mine = rank_slice(self.order.take(c.train.prompts_per_step), self.info.rank, self.info.world)
            groups = self._rollout_round([self.items[i] for i in mine], round_, sums)
            if c.algorithm.dynamic_sampling:
                varied = [g for g in groups if algos.varied_groups(torch.tensor([g.rewards]))[0]]
                sums.add("rollout/dropped", len(groups) - len(varied))
                groups = varied
            kept.extend(groups)
            if not c.algorithm.dynamic_sampling or all_reduce([len(kept)], self.info, "min")[0] >= per_rank:
                break
        kept = kept[:per_rank]
        # Every rank must run the same number of forward/backward passes: train on the smallest count.
        count = int(all_reduce([len(kept)], self.info, "min")[0])
        if count < len(kept):
            log.warning("rank %d trains on %d of its %d groups (another rank has fewer)", self.info.rank, count,
                        len(kept))
        return kept[:count], sums

    def _rollout_round(self, items: list, round_: int, sums: Sums) -> list[Group]:
        r = self.cfg.rollout
        k, gated = r.offline_per_group, r.offline_accuracy_threshold is not None
        started, decoded = time.perf_counter(), self.media.decoded
        requests = []
        for it in items:
            n = r.n - k if (k and it.offline and not gated) else r.n
            sampling = SamplingParams(temperature=r.temperature, top_p=r.top_p, top_k=r.top_k, max_tokens=r.max_tokens,
                                      seed=rollout_seed(self.cfg.seed, self.step, round_, it.index))
            requests.append(self.media.request(it, sampling, n, f"step{self.step}-r{round_}-{it.index}"))
        sums.add("time/media_s", time.perf_counter() - started)
        sums.add("frames/decoded", self.media.decoded - decoded)
        groups = []
        for it, req, rows in zip(items, requests, self.rollout.generate(requests)):
            if rows is None:
                sums.add("rollout/failed", 1)
                continue
            g = Group(it, req, make_responses(rows, self.tokenizer, self.rollout.ids))
            score(g, self.cfg.reward)
            if mix_offline(g, k, r.offline_accuracy_threshold, self.tokenizer, self.tokenizer.eos_token_id,
                           r.max_tokens, self.cfg.reward):
                sums.add("rollout/offline", 1)
            sums.add("rollout/groups", 1)
            for resp in g.responses:
                sums.add("rollout/responses", 1)
                sums.add("reward/sum", resp.reward)
                sums.add("reward/accuracy_sum", resp.accuracy)
                sums.add("reward/format_sum", resp.format)
                sums.add("response/tokens", len(resp.token_ids))
                sums.add("response/finished", resp.finished)
                if not resp.offline:
                    sums.add("rollout/online", 1)
                    sums.add("reward/online_sum", resp.reward)
            groups.append(g)
        return groups

    # -- log-probs and the update -------------------------------------------------------------------------------------
    def _micro_batches(self, seqs: list[Seq]) -> list[list[Seq]]:
        size = self.cfg.train.micro_batch_size
        return [seqs[i: i + size] for i in range(0, len(seqs), size)]

    def _batch(self, micro: list[Seq], encoded: list[Encoded]):
        pad = self.rollout.ids.pad if self.rollout.ids.pad is not None else 0
        return collate([encoded[s.prompt] for s in micro], [s.ids for s in micro], pad).to(self.info.device)

    @torch.no_grad()
    def _fill_logprobs(self, seqs: list[Seq], encoded: list[Encoded], policy: Policy, attr: str) -> None:
        for micro in self._micro_batches(seqs):
            logp, _, _ = forward_batch(policy, self._batch(micro, encoded), self.cfg.rollout.temperature)
            for row, s in zip(logp, micro):
                setattr(s, attr, row[: len(s.ids)].detach().cpu())

    def _padded(self, micro: list[Seq], attr: str, like: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(like)
        for i, s in enumerate(micro):
            values = getattr(s, attr)
            out[i, : len(values)] = values.to(out.device, out.dtype)
        return out

    def _update(self, seqs: list[Seq], encoded: list[Encoded], sums: Sums) -> None:
        c, a, info = self.cfg.train, self.cfg.algorithm, self.info
        clip = algos.ClipSettings(a.ratio, a.clip_low, a.clip_high, a.clip_ratio_c)
        use_old = c.mini_batches > 1 or c.ppo_epochs > 1
        per = math.ceil(len(seqs) / c.mini_batches)
        # Every rank holds the same number of sequences, so every rank makes the same (non-empty) mini-batches.
        minis = [m for m in (seqs[i * per: (i + 1) * per] for i in range(c.mini_batches)) if m]
        for group in self.optim.param_groups:
            group["lr"] = c.lr * min(1.0, (self.step + 1) / c.warmup_steps) if c.warmup_steps else c.lr
        for _ in range(c.ppo_epochs):
            for mini in minis:
                n_tokens, n_seqs = all_reduce([sum(len(s.ids) for s in mini), len(mini)], info)
                self.optim.zero_grad(set_to_none=True)
                for micro in self._micro_batches(mini):
                    batch = self._batch(micro, encoded)
                    logp, entropy, zero = forward_batch(self.policy, batch, self.cfg.rollout.temperature, True)
                    mask = batch.response_mask
                    old = self._padded(micro, "old_logp", logp) if use_old else logp.detach()
                    adv = torch.tensor([s.advantage for s in micro], device=logp.device)
                    per_token, stats = algos.policy_loss(logp, old, adv, mask, clip)
                    if self.ref is not None:
                        kl = algos.kl_penalty(logp, self._padded(micro, "ref_logp", logp), a.kl)
                        per_token = per_token + a.kl_coef * kl
                        sums.add("kl_sum", (kl.detach() * mask).sum())
                    weights = algos.token_weights(mask, a.loss_agg, int(n_seqs), int(n_tokens),
                                                  self.cfg.rollout.max_tokens)
                    loss = (weights * per_token).sum()
                    # FSDP averages gradients over ranks; scaling by the world size makes it a global sum.
                    total = loss * info.world + (zero if zero is not None else 0.0)
                    total.backward()
                    tokens = mask.sum()
                    sums.add("loss_sum", loss.detach())
                    sums.add("train/tokens", tokens)
                    sums.add("entropy_sum", (entropy * mask).sum())
                    for name, value in stats.items():
                        sums.add(f"{name}_sum", value * tokens)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
                grad_norm = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
                sums.add("optim/steps", 1)
                sums.add("grad_norm_sum", grad_norm if math.isfinite(grad_norm) else 0.0)
                if math.isfinite(grad_norm):
                    self.optim.step()
                else:  # a non-finite gradient would poison the weights: skip this update
                    sums.add("optim/skipped", 1)

    # -- metrics ----------------------------------------------------------------------------------------------------
    def _metrics(self, sums: Sums, times: dict[str, float]) -> dict[str, float]:
        m = step_metrics(sums.reduced(self.info), self.info.world)
        m.update({
            "lr": self.optim.param_groups[0]["lr"],
            "data/consumed": self.order.consumed,
            "time/sync_s": times["sync"] - times["start"],
            "time/rollout_s": times["rollout"] - times["sync"],
            "time/logprob_s": times["logprob"] - times["rollout"],
            "time/update_s": times["update"] - times["logprob"],
            "time/step_s": time.perf_counter() - times["start"],
        })
        return m

    def _log_samples(self, groups: list[Group]) -> None:
        n = self.cfg.logging.log_samples
        rows = [{"sample": g.item.sample.key, "modality": g.item.modality, "text": r.text, "reward": r.reward,
                 "offline": r.offline} for g in groups[:1] for r in g.responses[:n]]
        self.logger.log_samples(self.step + 1, rows)

    # -- checkpoints, export, validation ----------------------------------------------------------------------------
    def save(self) -> Path:
        state = {"step": self.step, "consumed": self.order.consumed, "config_hash": self.cfg.hash(),
                 "world_size": self.info.world, "model": self.cfg.model}
        return save_checkpoint(self.out, self.policy.model, self.optim, state, self.info, self.cfg.checkpoint.keep)

    def export(self, out_dir: Path) -> Path:
        """A Hugging Face directory of the current weights (all ranks call; rank 0 writes)."""
        full = gather_for_rank0(self.policy.model)
        if self.info.main:
            export_hf(full, self.model_dir, out_dir, {"step": self.step, "config_hash": self.cfg.hash(),
                                                      "base_model": self.cfg.model})
            log.info("exported step %d to %s", self.step, out_dir)
        barrier(self.info)
        return out_dir

    def run_validation(self) -> dict[str, float]:
        from .checkpoint_eval import evaluate_checkpoint

        where = self.out / "validation" / f"step-{self.step:06d}"
        model_dir = self.export(where / "model")
        scores: dict[str, float] = {}
        if self.info.main:
            scores = evaluate_checkpoint(model_dir, self.cfg.validation, where / "run", self.cfg.data.cache_dir)
        barrier(self.info)
        return scores

    def close(self) -> None:
        self.rollout.close()
        close_distributed()


def train(cfg: TrainConfig) -> dict[str, float]:
    """Run a whole training (the body of `python -m vbench_async.train`)."""
    trainer = Trainer(cfg)
    try:
        return trainer.fit()
    finally:
        trainer.close()
