"""Colocated vLLM rollouts for GPU training: one in-process `vllm.LLM` per rank, sharing the GPU with FSDP.

Design (untested on this project's CPU machines; see docs/training.md): the engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), so weight sync is `LLM.apply_model(lambda m: m.load_weights(...))` fed by a
generator that gathers one full tensor at a time from the FSDP shards (no full copy held). Between rollouts the
engine sleeps (KV cache freed) so the training step has the memory. Inputs are built by the evaluation backend
(`VLLMBackend.engine_input`): the same `(frames, metadata)` tuples and `do_sample_frames=False`.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import torch

from ..backends.base import Request
from .config import RolloutConfig
from .rollout import special_ids


class VLLMRollout:
    def __init__(self, model_dir: str, cfg: RolloutConfig, seed: int):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # weights are passed by reference
        from transformers import AutoProcessor
        from vllm import LLM

        from ..backends.hf import HFBackend
        from ..backends.vllm import VLLMBackend

        self.processor = AutoProcessor.from_pretrained(model_dir)
        self._encoder = HFBackend(model_dir)  # prompt encoding for the training forward (no model loaded)
        self._encoder.processor = self.processor
        self._inputs = VLLMBackend(model_dir)  # request -> engine input, exactly as in evaluation
        self._inputs._processor = self.processor
        self.llm = LLM(model=model_dir, dtype="bfloat16", seed=seed, enable_sleep_mode=True,
                       gpu_memory_utilization=cfg.vllm_gpu_memory_utilization, max_model_len=cfg.vllm_max_model_len,
                       limit_mm_per_prompt={"video": 1, "image": 4}, enable_prefix_caching=True)
        self.ids = special_ids(model_dir)
        self._asleep = False

    def inputs(self, request: Request) -> Any:
        return self._encoder.inputs(request)

    def _wake(self, tags: list[str]) -> None:
        if self._asleep:
            self.llm.wake_up(tags=tags)

    def sync(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self._wake(["weights"])
        self.llm.apply_model(lambda model: model.load_weights(weights))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights

    def generate(self, requests: list[Request]) -> list[list[list[int]] | None]:
        from vllm import SamplingParams

        self._wake(["kv_cache"])
        self._asleep = False
        params = [SamplingParams(n=r.n, temperature=r.sampling.temperature, top_p=r.sampling.top_p,
                                 top_k=r.sampling.top_k if r.sampling.top_k > 0 else -1,
                                 max_tokens=r.sampling.max_tokens, seed=r.sampling.seed,
                                 logit_bias={t: -100.0 for t in self.ids.media}) for r in requests]
        outs = self.llm.generate([self._inputs.engine_input(r) for r in requests], params, use_tqdm=False)
        self.llm.sleep(level=1)  # frees the KV cache and offloads weights for the training step
        self._asleep = True
        return [[list(o.token_ids) for o in out.outputs] for out in outs]
