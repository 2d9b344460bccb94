"""The workload of a run, planned before it starts: frames, tokens, context, KV and frame cache (plan.py), the video
headers they come from (probe.py), each family's token rules (tokens.py), and the engine sized from them (sizing.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from .plan import CONTEXT_OVERFLOW, BenchmarkInput, PlanEntry, WorkloadPlan, plan_workload
from .probe import HeaderStore
from .tokens import PromptCounter, model_limits

__all__ = ["CONTEXT_OVERFLOW", "WorkloadPlan", "build_plan"]


def build_plan(model: Any, benchmarks: Sequence[tuple[Any, Any, Sequence[tuple[Any, Any, Any, Sequence[Path]]]]],
               cache: Any, *, thinking: bool, max_tokens: int, concurrency: int, max_model_len: int | None = None,
               max_num_batched_tokens: int | None = None, not_run: dict[str, str] | None = None) -> WorkloadPlan:
    """Plan `benchmarks` — (Benchmark, FrameSpec, [(work item, video path, window, image paths)]) — for `model`
    (models.ModelRef), with the frame cache `cache` (its decoder, fingerprints and entries)."""
    inputs = []
    for bench, spec, entries in benchmarks:
        render = bench.prompt_renderer(thinking)
        inputs.append(BenchmarkInput(
            id=bench.id, spec=spec, presets=dict(bench.card.presets),
            entries=[PlanEntry(sample=item.sample, prompt=render, video=video, window=window,
                               images=tuple(images or ()), error=item.error)
                     for item, video, window, images in entries]))
    headers = HeaderStore(cache.root, cache.decoder, workers=min(16, (os.cpu_count() or 1) * 4),
                          fingerprint=cache.fingerprint)
    return plan_workload(
        inputs, PromptCounter(model.path, model.family), model_limits(model.path, on_cpu=_cpu_only()), headers,
        model=model.name, max_tokens=max_tokens, concurrency=concurrency, cache_root=cache.root,
        entry_path=cache.layout.entry_path, max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens, not_run=not_run, codec=cache.codec,
        cache_max_bytes=cache.budget.max_bytes if cache.budget is not None else None)


def _cpu_only() -> bool:
    """No CUDA device visible (the CPU engine serves bfloat16); decided without importing vLLM."""
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return True
