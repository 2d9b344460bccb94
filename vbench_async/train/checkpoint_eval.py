"""Held-out validation during training, through the evaluation pipeline: the exported checkpoint is evaluated exactly as `vbench-async run`."""

from __future__ import annotations

from pathlib import Path

from .config import ValidationConfig


def evaluate_checkpoint(model_dir: Path, cfg: ValidationConfig, out_dir: Path, cache_dir: str | None = None) -> dict[str, float]:
    """Evaluate `model_dir` on the configured benchmarks; {"val/<benchmark>": score in [0, 1]}.

    `cache_dir` is the training's frame cache: validation videos sampled like the training ones are reused."""
    from ..backends.base import SamplingParams
    from ..benchmarks.selection import Selection
    from ..runner import RunConfig, run

    summary = run(RunConfig(
        model=str(model_dir),
        selection=Selection(suite=cfg.suite, benchmarks=tuple(cfg.benchmarks) or None,
                            data_root=Path(cfg.data_root) if cfg.data_root else None, max_samples=cfg.max_samples),
        output_dir=Path(out_dir),
        cache_dir=Path(cache_dir) if cache_dir else None,
        backend=cfg.backend,
        sampling=SamplingParams(max_tokens=cfg.max_tokens),
        frame_overrides=dict(cfg.frames),
        progress=False,
    ))
    return {f"val/{bid}": float(b["score"]) for bid, b in summary["benchmarks"].items()
            if isinstance(b.get("score"), (int, float))}
