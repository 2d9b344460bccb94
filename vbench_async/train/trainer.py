"""The training loop, in one readable place.

Before step 1 the frame cache is filled (each rank its share, split by decoding cost) and items whose frames cannot
be cached are dropped on every rank (`data/dropped_items`, OUTPUT/dropped_items.jsonl); ranks that finish early wait
on the store, not in a collective, so preparation may outlast `fsdp.timeout_s`. Then one probe checks that the policy
sees the pixels (vision_check.py: log-probs change with them, the vision tower gets a gradient) or refuses it.
Each step, on every rank:
  1. sync     the FSDP weights into the rollout engine (full tensors, cast and gathered in buckets: sync.py)
  2. rollout  this rank's share of the prompts, n samples each (collect.py: cached frames, the evaluation's
              `Request`, offline responses mixed in, rewards from the scorer library, DAPO refills); with
              `fsdp.offload_rollout` the training state waits in host memory meanwhile (offload.py)
  3. logprob  old / reference log-probs when the algorithm needs them
  4. update   clipped policy loss aggregated over the global batch; one optimizer step per mini-batch
  5. log      metrics reduced over ranks -> metrics.jsonl; checkpoints, export and validation at their cadence
A failure on any rank ends every rank (watch.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import ContextManager

import torch
import yaml

from ..errors import UserError
from ..families.release_positions import use_release_positions
from . import algos, watch
from .checkpoint import (
    export_dir,
    export_hf,
    find_resume,
    gather_for_rank0,
    load_checkpoint,
    save_checkpoint,
)
from .collect import Collector
from .config import RolloutEngine, TrainConfig
from .data import DataOrder, MediaSource, TrainItem, frame_spec, load_items
from .fsdp import all_reduce, barrier, build_mesh, close_distributed, init_distributed, load_sharded, shard
from .headers import HeaderFile, SharedHeaders, dataset_name
from .logger import MetricsLogger, Sums, step_metrics
from .offload import HostOffload, OffloadStats
from .packing import resolve_attention
from .policy import Policy
from .resume_identity import resume_changes
from .rollout import Group
from .sync import SyncStats, bucketed_full_tensors
from .tp_group import TPGroup
from .trainer_state import ExportInfo, TrainerState, read_state
from .update import Seq, Updater
from .vision_check import startup_check

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, cfg: TrainConfig):
        from .. import models

        self.cfg = cfg
        # Before the process group exists: a tiny model is built (each rank may hold the build lock) with writers
        # that, inside a group, write on global rank 0 only.
        model = models.resolve(cfg.model)
        self.info = init_distributed(cfg.fsdp)
        watch.start_watch(self.info.rank, self.info.world, cfg.fsdp.peer_timeout_s)
        tp = cfg.rollout.tensor_parallel_size
        if self.info.local_world % tp:
            raise UserError(f"rollout.tensor_parallel_size ({tp}) must divide the processes per node "
                            f"({self.info.local_world})")
        gpu = self.info.device.type == "cuda"
        if tp > 1 and not (gpu and cfg.rollout.kind(gpu) is RolloutEngine.VLLM):
            raise UserError("rollout.tensor_parallel_size > 1 needs the vllm engine on GPUs")
        if cfg.train.prompts_per_step % self.info.world:
            raise UserError(f"train.prompts_per_step ({cfg.train.prompts_per_step}) must be a multiple of the "
                            f"number of processes ({self.info.world})")
        self.out = Path(cfg.output_dir)
        torch.manual_seed(cfg.seed)
        self.model_dir = model.path
        self.items = load_items(cfg.data)
        self.media = MediaSource(frame_spec(cfg.data, model), cfg.data.frame_source, cfg.data.cache_dir,
                                 cfg.data.decode_workers, headers=lambda root: SharedHeaders(
                                     HeaderFile(root, dataset_name(cfg.data)), self.info.rank, self.info.world),
                                 ablation=cfg.data.ablation)
        self.dropped = self._prepare_media()
        self.mesh = build_mesh(cfg.fsdp, self.info)  # one mesh (and its process groups) for policy and reference
        self.order = DataOrder(len(self.items), cfg.seed, cfg.data.shuffle)
        self.mixed = gpu and cfg.train.dtype == "auto"
        self.load_dtype = torch.bfloat16 if cfg.train.dtype == "bfloat16" else torch.float32
        self.attention = resolve_attention(cfg.train.attn_implementation, self.info.device,
                                           self.mixed or self.load_dtype == torch.bfloat16)
        self.policy = self._build_policy(trainable=True)
        log.info("attention %s, %s micro-batches", self.attention, "packed" if self.policy.packed else "padded")
        # Refuse a policy that would train blind to the pixels (a transformers whose Qwen-VL forward drops the
        # vision features): one tiny probe, every rank alike, before anything else is built (vision_check.py).
        self.vision = startup_check(self.policy, self.items, self.media, self.model_dir, self.info,
                                    check_grad=not cfg.train.freeze_vision)
        if cfg.algorithm.kl != "none":  # frozen: bf16 on GPU (the compute dtype anyway), half the memory
            self.ref = self._build_policy(False, torch.bfloat16 if gpu or cfg.train.dtype == "bfloat16"
                                          else torch.float32)
        else:
            self.ref = None
        self.optim = torch.optim.AdamW([p for p in self.policy.parameters() if p.requires_grad], lr=cfg.train.lr,
                                       betas=tuple(cfg.train.betas), weight_decay=cfg.train.weight_decay,
                                       foreach=True)  # one kernel per op over all (sharded) params, also on CPU
        # Parameters (and, with a reference, its weights) in host memory while the engine runs: fsdp.offload_rollout
        self.offload = HostOffload([self.policy] + ([self.ref] if self.ref is not None else []), self.optim,
                                   self.info.device) if cfg.fsdp.offload_rollout else None
        if gpu:  # what loading left in torch's cache goes back to the driver before vLLM sizes its KV cache
            torch.cuda.empty_cache()
        self.rollout = self._build_rollout(gpu)
        self.tokenizer = self.rollout.processor.tokenizer
        self.collector = Collector(cfg, self.info, self.items, self.order, self.media, self.rollout)
        pad = self.rollout.ids.pad if self.rollout.ids.pad is not None else 0
        self.updater = Updater(cfg, self.info, self.policy, self.ref, self.optim, pad)
        self.step, self._synced = 0, True  # the rollout engine starts from the same checkpoint files
        self.exported: Path | None = None  # the last export written
        resume = find_resume(self.out, cfg.checkpoint.resume)
        if resume is not None:
            self._resume(resume)
        self.logger = MetricsLogger(self.out, cfg.logging, self.info.main, cfg.train.steps, self.step,
                                    cfg.to_dict())
        if self.info.main:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    # -- setup ------------------------------------------------------------------------------------------------------
    def _prepare_media(self) -> list[tuple[TrainItem, str]]:
        """Fill the cache; drop (on every rank alike) the items whose frames could not be cached on any rank."""
        cfg, info = self.cfg, self.info
        shared = cfg.data.cache_scope == "shared"
        report = self.media.prepare(self.items, info.rank if shared else info.local_rank,
                                    info.world if shared else info.local_world,
                                    progress=info.main and cfg.logging.progress)
        if report is None:  # frame_source: decode
            return []
        log.info("frame cache (rank %d): %s", info.rank, report.summary())
        mine = self.media.uncached(self.items, info.rank if shared else info.local_rank,
                                   info.world if shared else info.local_world)
        failed = mine
        if info.world > 1:  # every rank's failures; waiting on the store, since a rank may still be decoding
            posted = watch.exchange("uncached", json.dumps(mine))
            if posted is not None:
                failed = sorted({i for text in posted for i in json.loads(text)})
            else:  # no store to wait on: a collective (bounded by fsdp.timeout_s)
                flags = [0.0] * len(self.items)
                for i in mine:
                    flags[i] = 1.0
                failed = [i for i, f in enumerate(all_reduce(flags, info, "max")) if f]
        dropped = [(self.items[i], self.media.why_uncached(self.items[i])) for i in failed]
        if dropped:
            gone = set(failed)
            kept = [it for i, it in enumerate(self.items) if i not in gone]
            if not kept:
                raise UserError(f"no training item has usable frames ({len(dropped)} dropped; first: "
                                f"{dropped[0][0].sample.key}: {dropped[0][1]})")
            self.items = kept
            log.warning("dropped %d item(s) whose frames cannot be cached: %s", len(dropped),
                        "; ".join(f"{it.sample.key} ({why})" for it, why in dropped[:10]))
            if info.main:
                self.out.mkdir(parents=True, exist_ok=True)
                (self.out / "dropped_items.jsonl").write_text("".join(
                    json.dumps({"sample": it.sample.key, "video": str(it.video), "reason": why}) + "\n"
                    for it, why in dropped))
        return dropped

    def _build_policy(self, trainable: bool, dtype: torch.dtype | None = None) -> Policy:
        from transformers import AutoConfig, AutoModelForImageTextToText

        dtype = dtype or self.load_dtype
        load = {"dtype": dtype, "attn_implementation": self.attention}
        full = None
        if self.info.main or self.info.world == 1:  # only rank 0 reads the weights; the others get them by broadcast
            full = AutoModelForImageTextToText.from_pretrained(self.model_dir, **load)
        if self.info.world > 1:
            with torch.device("meta"):
                model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(self.model_dir), **load)
        else:
            model = full
        use_release_positions(model)  # the text after a video where the vLLM rollouts and the release put it
        if trainable:
            if self.cfg.train.gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if self.cfg.train.freeze_vision:
                model.model.visual.requires_grad_(False)
            model.train()  # Qwen-VL has no dropout; train mode is what enables gradient checkpointing
        else:
            model.requires_grad_(False).eval()
        mixed = self.mixed and dtype == torch.float32
        policy = Policy(model, packing=self.cfg.train.packing)
        if self.info.world > 1:
            return load_sharded(policy, self.cfg.fsdp, self.info, mixed, full, self.mesh)
        return shard(policy.to(self.info.device), self.cfg.fsdp, self.info, mixed, self.mesh)

    def _build_rollout(self, gpu: bool):
        if self.cfg.rollout.kind(gpu) is RolloutEngine.VLLM:
            from .vllm_rollout import VLLMRollout

            tp = self.cfg.rollout.tensor_parallel_size  # a TP group's ranks share one seed and one batch
            return VLLMRollout(self.model_dir, self.cfg.rollout,
                               seed=self.cfg.seed + TPGroup(self.info.rank, self.info.world, tp).index,
                               world=self.info.world, prompts_per_call=self.cfg.train.prompts_per_step
                               // self.info.world * tp)
        from .rollout import HFRollout

        return HFRollout(self.model_dir, self.info.device)

    def _resume(self, path: Path) -> None:
        """Resume by global step: what is trained must match (resume_identity); runtime knobs and the layout may
        have changed, and each change is logged."""
        changes = resume_changes(self.cfg, read_state(path), str(path))
        if changes:
            log.info("changed since the checkpoint (old -> new): %s", "; ".join(changes))
        state = load_checkpoint(path, self.policy.model, self.optim)
        self.step, self.order.consumed, self._synced = state.step, state.consumed, False
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
                if self._export_requested():
                    self.export(export_dir(self.out, self.step))
                self.logger.log(self.step, metrics)
                last = metrics
            if saved_at != self.step:
                self.save()
            if cfg.checkpoint.export:
                self.export(export_dir(self.out, self.step))
        finally:
            self.logger.close()
            self.media.close()
        return last

    def _export_requested(self) -> bool:
        """Whether someone created OUTPUT/EXPORT (an export on demand; rank 0 looks, every rank learns it)."""
        flag = self.out / "EXPORT"
        wanted = float(self.info.main and flag.exists())
        if all_reduce([wanted], self.info, "max")[0]:
            if self.info.main:
                flag.unlink(missing_ok=True)
            return True
        return False

    def _sync_rollout(self, stats: SyncStats) -> None:
        """The policy's current weights into the rollout engine: shards cast to its dtype, gathered in buckets."""
        self.rollout.sync(bucketed_full_tensors(self.policy.model, self.rollout.sync_dtype,
                                                self.cfg.rollout.sync_bucket_mb << 20, stats))

    def train_step(self) -> dict[str, float]:
        times = {"start": time.perf_counter()}
        synced = SyncStats()
        if not self._synced:
            self._sync_rollout(synced)
        self._synced = False
        times["sync"] = time.perf_counter()
        moved = OffloadStats()
        with self._offloaded(moved):
            groups, sums = self.collector.collect(self.step)
        times["rollout"] = time.perf_counter()
        for g in groups:
            g.advantages = algos.group_advantages(torch.tensor([g.rewards]), self.cfg.algorithm.advantage,
                                                  self.cfg.algorithm.std_eps)[0].tolist()
        encoded = [g.encoded for g in groups]
        mask_cut = self.cfg.algorithm.mask_truncated  # DAPO: a response cut at max_tokens teaches nothing
        seqs = [Seq(i, r.token_ids, a, trained=r.finished or not mask_cut,
                    rollout_logp=None if r.rollout_logp is None else torch.tensor(r.rollout_logp))
                for i, g in enumerate(groups) for r, a in zip(g.responses, g.advantages)]
        sums.add("train/masked_truncated", sum(not s.trained for s in seqs))
        if seqs:  # every rank holds its equal share of the global batch (pool.py): all have sequences, or none
            self.updater.logprobs(seqs, encoded)
        times["logprob"] = time.perf_counter()
        if seqs:
            self.updater.update(seqs, encoded, self.step, sums)
        times["update"] = time.perf_counter()
        self._log_samples(groups)
        metrics = self._metrics(sums, times)
        metrics.update({"sync/bytes": float(synced.bytes), "sync/tensors": float(synced.tensors),  # per rank
                        "sync/collectives": float(synced.collectives),
                        "sync/received_bytes": float(synced.received_bytes)})
        if self.offload is not None:  # per rank: each way, and the time of both copies (in time/rollout_s)
            metrics.update({"offload/bytes": float(moved.bytes), "time/offload_s": moved.offload_s + moved.reload_s})
        return metrics

    def _offloaded(self, stats: OffloadStats) -> ContextManager[None]:
        """The training state in host memory for the block when fsdp.offload_rollout is set."""
        return self.offload.moved(stats) if self.offload is not None else contextlib.nullcontext()

    # -- metrics ----------------------------------------------------------------------------------------------------
    def _metrics(self, sums: Sums, times: dict[str, float]) -> dict[str, float]:
        reduced = sums.reduced(self.info)
        m = step_metrics(reduced, self.info.world)
        m.update({
            "lr": self.optim.param_groups[0]["lr"],
            "data/dropped_items": len(self.dropped),
            "data/consumed": self.order.consumed,
            "time/sync_s": times["sync"] - times["start"],
            "time/rollout_s": times["rollout"] - times["sync"],
            "time/logprob_s": times["logprob"] - times["rollout"],
            "time/update_s": times["update"] - times["logprob"],
            "time/step_s": time.perf_counter() - times["start"],
        })
        m["tokens/step"] = reduced["prompt/tokens"] + reduced["response/tokens"]  # every rank's, prompt + response
        m["throughput/tokens_per_s"] = m["tokens/step"] / m["time/step_s"]
        return m

    def _log_samples(self, groups: list[Group]) -> None:
        n = self.cfg.logging.log_samples
        rows = [{"sample": g.item.sample.key, "modality": g.item.modality, "text": r.text, "reward": r.reward,
                 "offline": r.offline} for g in groups[:1] for r in g.responses[:n]]
        self.logger.log_samples(self.step + 1, rows)

    # -- checkpoints, export, validation ----------------------------------------------------------------------------
    def save(self) -> Path:
        state = TrainerState(step=self.step, consumed=self.order.consumed, config_hash=self.cfg.hash(),
                             config=self.cfg.to_dict(), world_size=self.info.world, model=self.cfg.model)
        return save_checkpoint(self.out, self.policy.model, self.optim, state, self.info, self.cfg.checkpoint.keep)

    def export(self, out_dir: Path) -> Path:
        """A Hugging Face directory of the current weights (all ranks call; rank 0 writes)."""
        full = gather_for_rank0(self.policy.model)
        if self.info.main:
            export_hf(full, self.model_dir, out_dir, ExportInfo(step=self.step, config_hash=self.cfg.hash(),
                                                                base_model=self.cfg.model))
            log.info("exported step %d to %s", self.step, out_dir)
        barrier(self.info)
        self.exported = out_dir
        return out_dir

    def run_validation(self) -> dict[str, float]:
        """Every rank evaluates its share of the held-out set on its own rollout engine (validation.py)."""
        from .validation import validate

        if not self._synced:  # the engine holds the weights from before this step's update: give it the new ones
            self._sync_rollout(SyncStats())
            self._synced = True  # ... which the next step's rollout then uses as they are
        with self._offloaded(OffloadStats()):
            return validate(self.cfg, self.step, self.info, self.rollout, str(self.model_dir), self.out)

    def close(self) -> None:
        self.rollout.close()
        close_distributed()


def train(cfg: TrainConfig) -> tuple[dict[str, float], Path | None]:
    """Run a whole training (the body of `python -m vbench_async.train`): the last step's metrics and the export.

    A failure is posted to the other ranks before this rank exits (they stop within seconds instead of waiting in
    their next collective); the process group is then left as it is, since tearing it down would wait for them."""
    trainer = None
    try:
        trainer = Trainer(cfg)
        metrics = trainer.fit()
    except BaseException as exc:
        watch.report_failure(exc)
        if trainer is not None:
            try:
                trainer.rollout.close()  # its engine processes must not outlive this one
            except Exception as close_error:
                log.warning("closing the rollout engine after the failure: %s", close_error)
        watch.stop_watch(finished=False)
        raise
    watch.stop_watch(finished=True)
    trainer.close()
    return metrics, trainer.exported
