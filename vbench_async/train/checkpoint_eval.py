"""Validation that fits in a training job: `vbench-async run` on the exported checkpoint, in a child process.

The child has its own engine settings (`validation.max_model_len`, `gpu_memory_utilization`), evaluates at most
`validation.max_samples` records per benchmark, and is stopped after `validation.timeout_s`; training then goes on
without scores. Only rank 0 evaluates; the other ranks wait through the store (`watch.wait_for`), not in a
collective, so however long it takes no collective timeout is tripped.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from .config import ValidationConfig

log = logging.getLogger(__name__)

_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                  "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")


def command(model_dir: Path, cfg: ValidationConfig, out_dir: Path, cache_dir: str | None) -> list[str]:
    """The `vbench-async run` argv of one validation."""
    cmd = [sys.executable, "-m", "vbench_async", "run", "--model", str(model_dir), "--output-dir", str(out_dir),
           "--backend", cfg.backend, "--max-tokens", str(cfg.max_tokens), "--no-site", "--no-progress",
           "--gpu-memory-utilization", str(cfg.gpu_memory_utilization)]
    if cfg.suite:
        cmd += ["--suite", cfg.suite]
    if cfg.benchmarks:
        cmd += ["--benchmarks", ",".join(cfg.benchmarks)]
    if cfg.data_root:
        cmd += ["--data-root", cfg.data_root]
    if cfg.max_samples is not None:
        cmd += ["--max-samples", str(cfg.max_samples)]
    if cfg.max_model_len is not None:
        cmd += ["--max-model-len", str(cfg.max_model_len)]
    if cache_dir:
        cmd += ["--cache-dir", cache_dir]
    for key, value in cfg.frames.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def evaluate_checkpoint(model_dir: Path, cfg: ValidationConfig, out_dir: Path,
                        cache_dir: str | None = None) -> dict[str, float]:
    """{"val/<benchmark>": score in [0, 1]}; {} (with a warning) when the evaluation fails or runs out of time.

    `cache_dir` is the training's frame cache: validation videos sampled like the training ones are reused."""
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARS}
    log_path = Path(out_dir).with_suffix(".log")
    Path(out_dir).parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(command(model_dir, cfg, out_dir, cache_dir), stdout=fh, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=cfg.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log.warning("validation ran past validation.timeout_s (%g s) and was stopped; see %s", cfg.timeout_s,
                        log_path)
            return {}
    summary_path = Path(out_dir) / "summary.json"
    # Exit 1 means some samples failed (recorded per sample) or the run is partial: its scores still stand.
    if code not in (0, 1) or not summary_path.is_file():
        log.warning("validation failed (exit status %d); see %s", code, log_path)
        return {}
    if code == 1:
        log.warning("validation: some samples failed (their scores count as wrong); see %s", log_path)
    summary = json.loads(summary_path.read_text())
    return {f"val/{bid}": float(b["score"]) for bid, b in summary["benchmarks"].items()
            if isinstance(b.get("score"), (int, float))}
