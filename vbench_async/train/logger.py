"""Metrics out: `metrics.jsonl` (always), TensorBoard and W&B (when enabled and installed), a progress bar.

Only rank 0 writes. Each JSONL line is one step: {"step": N, "time": unix seconds, <metric>: value, ...}.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..record_io import OutputRecord, always
from .config import LoggingConfig
from .fsdp import DistInfo, all_reduce

log = logging.getLogger(__name__)

# Shown on the progress bar, in this order.
_BAR_KEYS = (("reward/mean", "reward"), ("reward/accuracy", "acc"), ("loss", "loss"), ("time/step_s", "s/step"))


@dataclass
class StepLine(OutputRecord):
    """One line of metrics.jsonl or samples.jsonl: the step first, then (metrics.jsonl) the time; the metrics or the
    sample's fields are the line's other keys (`extra`)."""

    step: int = always(0)
    time: float | None = None


class MetricsLogger:
    def __init__(self, output_dir: Path, cfg: LoggingConfig, enabled: bool, total_steps: int, start_step: int,
                 run_config: dict[str, Any]):
        self.enabled = enabled
        self.total_steps = total_steps
        self.path = Path(output_dir) / "metrics.jsonl"
        self.samples_path = Path(output_dir) / "samples.jsonl"
        self._tb = self._wandb = self._bar = None
        if not enabled:
            return
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        for path in (self.path, self.samples_path):
            _keep_until(path, start_step)
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(output_dir) / "tensorboard"))
            except ImportError:
                log.warning("logging.tensorboard is set but tensorboard is not installed (pip install tensorboard)")
        if cfg.wandb_project:
            try:
                import wandb

                self._wandb = wandb.init(project=cfg.wandb_project, config=run_config, dir=str(output_dir),
                                         resume="allow")
            except ImportError:
                log.warning("logging.wandb_project is set but wandb is not installed (pip install wandb)")
        if cfg.progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, desc="training", unit="step", file=sys.stderr,
                             dynamic_ncols=True)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        clean = {k: (v if isinstance(v, (int, float)) and math.isfinite(v) else None) for k, v in metrics.items()}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(StepLine(step=step, time=round(time.time(), 3), extra=clean).to_json()) + "\n")
        if self._tb is not None:
            for k, v in clean.items():
                if v is not None:
                    self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in clean.items() if v is not None}, step=step)
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix({short: f"{clean[k]:.3g}" for k, short in _BAR_KEYS if clean.get(k) is not None})
        else:  # no bar (logging.progress false, a launcher's log): one line per step, so the console is never silent
            log.info("%s", step_line(step, self.total_steps, clean))

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        if self.enabled and rows:
            with self.samples_path.open("a", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(StepLine(step=step, extra=row).to_json(), ensure_ascii=False) + "\n")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def step_line(step: int, total: int, metrics: dict[str, float | None]) -> str:
    """"step 3/12 reward=0.5 acc=0.5 loss=0.012 s/step=8.1": a step's place in the run and its headline metrics."""
    shown = " ".join(f"{short}={metrics[k]:.4g}" for k, short in _BAR_KEYS if metrics.get(k) is not None)
    return f"step {step}/{total} {shown}".rstrip()


def _keep_until(path: Path, step: int) -> None:
    """Drop lines logged after `step` by an earlier run of this directory (it resumes from `step`, or restarts)."""
    if not path.is_file():
        return
    kept = [line for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if line.strip() and StepLine.from_json(json.loads(line), f"{path}:{n}").step <= step]
    path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")


class Sums:
    """Named running sums, reduced over ranks in one collective (every rank adds the same names)."""

    def __init__(self, *names: str):
        self.values = {n: 0.0 for n in names}

    def add(self, name: str, value: float) -> None:
        self.values[name] = self.values.get(name, 0.0) + float(value)

    def reduced(self, info: DistInfo) -> dict[str, float]:
        keys = sorted(self.values)
        return dict(zip(keys, all_reduce([self.values[k] for k in keys], info)))


def _ratio(sums: dict[str, float], num: str, den: str) -> float:
    return sums.get(num, 0.0) / sums[den] if sums.get(den) else float("nan")


def step_metrics(s: dict[str, float], world: int) -> dict[str, float]:
    """A step's metrics from the sums of all ranks (means per response, per token or per optimizer step)."""
    optim_steps = s.get("optim/steps", 0.0) / world  # every rank counted the same optimizer steps
    m = {
        "reward/mean": _ratio(s, "reward/sum", "rollout/responses"),
        "reward/accuracy": _ratio(s, "reward/accuracy_sum", "rollout/responses"),
        "reward/format": _ratio(s, "reward/format_sum", "rollout/responses"),
        "reward/online": _ratio(s, "reward/online_sum", "rollout/online"),  # the policy's own samples
        "response/length": _ratio(s, "response/tokens", "rollout/responses"),
        "response/finished": _ratio(s, "response/finished", "rollout/responses"),
        "rollout/groups": s["rollout/groups"],
        "rollout/dropped": s["rollout/dropped"],
        "rollout/failed": s["rollout/failed"],
        "rollout/short": s.get("rollout/short", 0.0),  # groups the global batch lacks after the last round
        "rollout/moved": s.get("rollout/moved", 0.0),  # groups sent to another rank to fill its share
        # the ranks' forward tokens, max over mean, before and after the pool's balancing swaps (1 = even)
        "rollout/balance_before": s.get("rollout/balance_before", float("nan")),
        "rollout/balance_after": s.get("rollout/balance_after", float("nan")),
        "rollout/too_long": s.get("rollout/too_long", 0.0),
        "data/media_failed": s.get("data/media_failed", 0.0),
        "reward/overlong": _ratio(s, "reward/overlong_sum", "rollout/responses"),
        "train/masked_truncated": s.get("train/masked_truncated", 0.0),
        "train/padding_passes": s.get("train/padding_passes", 0.0),
        "rollout/offline_groups": s["rollout/offline"],
        "frames/decoded": s["frames/decoded"],
        "time/media_s": s["time/media_s"] / world,
        "loss": s.get("loss_sum", float("nan")) / optim_steps if optim_steps else float("nan"),
        "entropy": _ratio(s, "entropy_sum", "train/tokens"),
        "grad_norm": s.get("grad_norm_sum", 0.0) / world / optim_steps if optim_steps else float("nan"),
        "optim/skipped": s.get("optim/skipped", 0.0) / world,
    }
    for name in ("clipfrac_high", "clipfrac_low", "ratio_mean", "approx_kl_old", "kl"):
        if f"{name}_sum" in s:
            m[name] = _ratio(s, f"{name}_sum", "train/tokens")
    for name in ("weight", "truncated", "abs_logp_diff"):  # TIS, over the tokens with engine log-probs
        if f"rollout_is/{name}_sum" in s:
            m[f"rollout_is/{name}"] = _ratio(s, f"rollout_is/{name}_sum", "rollout_is/tokens")
    if "rollout_is/tokens" in s:
        m["rollout_is/tokens"] = s["rollout_is/tokens"]
    return m
