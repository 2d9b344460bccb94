"""The workload of a run, planned before it starts: frames, tokens, context, KV and frame cache (plan.py), the video
headers they come from (probe.py), each family's token rules (tokens.py), and the engine sized from them (sizing.py).
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from .memo import ProcessorMemo
from .plan import BenchmarkInput, PlanEntry, WorkloadPlan, plan_workload
from .probe import HeaderStore
from .tokens import ModelLimits, PromptCounter, model_limits

__all__ = ["WorkloadPlan", "build_plan"]


def build_plan(model: Any, benchmarks: Sequence[tuple[Any, Any, Sequence[PlanEntry]]], cache: Any, *,
               max_tokens: int, concurrency: int, max_model_len: int | None = None,
               max_num_batched_tokens: int | None = None, not_run: dict[str, str] | None = None,
               system: str | None = None) -> WorkloadPlan:
    """Plan `benchmarks` — (Benchmark, FrameSpec, the run's pending entries: `pipeline.PlanEntry`, each with its
    sample, prompt renderer, video path, window, image paths and known error) — for `model` (models.ModelRef), with
    the frame cache `cache` (its decoder, fingerprints and entries). `system`: the system turn each request sends."""
    inputs = [BenchmarkInput(id=bench.id, spec=spec, presets=dict(bench.card.presets), entries=entries)
              for bench, spec, entries in benchmarks]
    headers = HeaderStore(cache.root, cache.decoder, workers=min(16, (os.cpu_count() or 1) * 4),
                          fingerprint=cache.fingerprint)
    # The processor's answers from the last plan of this model (memo.py): transformers is imported only for new ones.
    # Not for a hub id whose revision is unknown: its files could change under the same fingerprint.
    known = Path(model.path).is_dir() or not model.fingerprint.endswith("@unknown")
    memo = ProcessorMemo.at(cache.root / "plan", model.path, model.fingerprint, model.family) if known else \
        ProcessorMemo()
    counter = PromptCounter(model.path, model.family, memo, system)
    plan = plan_workload(
        inputs, counter, _limits(model.path, memo), headers,
        model=model.name, max_tokens=max_tokens, concurrency=concurrency, cache_root=cache.root,
        entry_path=cache.layout.entry_path, max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens, not_run=not_run, codec=cache.codec,
        cache_max_bytes=cache.budget.max_bytes if cache.budget is not None else None)
    counter.save()
    return plan


def _limits(model_path: str, memo: ProcessorMemo) -> ModelLimits:
    """The model's limits on this machine. They differ between the CPU engine and a GPU only for a checkpoint not
    stored in 16-bit floats (the CPU engine serves bfloat16): only then is torch imported to tell which this is."""
    def limits(on_cpu: bool) -> ModelLimits:
        return ModelLimits(**memo.answer("limits", "cpu" if on_cpu else "device",
                                         lambda: asdict(model_limits(model_path, on_cpu=on_cpu))))

    on_cpu, on_device = limits(True), limits(False)
    return on_cpu if on_cpu == on_device or _cpu_only() else on_device


def _cpu_only() -> bool:
    """No CUDA device visible (the CPU engine serves bfloat16); decided without importing vLLM."""
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return True
