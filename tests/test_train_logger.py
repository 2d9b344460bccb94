"""Metrics out: JSONL lines per step, non-finite values as null, and a resumed run replacing later lines."""

from __future__ import annotations

import json
import math

import pytest

from vbench_async.train.config import LoggingConfig
from vbench_async.train.logger import MetricsLogger, step_metrics


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resumed_logger_drops_lines_after_the_checkpoint(tmp_path):
    cfg = LoggingConfig(progress=False)
    first = MetricsLogger(tmp_path, cfg, True, total_steps=4, start_step=0, run_config={})
    for step in (1, 2, 3):
        first.log(step, {"loss": 0.5, "grad_norm": math.nan})
    first.log_samples(3, [{"text": "B"}])
    first.close()
    assert [r["step"] for r in _lines(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    assert _lines(tmp_path / "metrics.jsonl")[0]["grad_norm"] is None
    resumed = MetricsLogger(tmp_path, cfg, True, total_steps=4, start_step=2, run_config={})  # checkpoint at 2
    resumed.log(3, {"loss": 0.25})
    resumed.close()
    assert [(r["step"], r["loss"]) for r in _lines(tmp_path / "metrics.jsonl")] == [(1, 0.5), (2, 0.5), (3, 0.25)]
    assert _lines(tmp_path / "samples.jsonl") == []
    MetricsLogger(tmp_path / "rank1", cfg, False, 4, 0, {}).log(1, {"loss": 1.0})  # other ranks write nothing
    assert not (tmp_path / "rank1").exists()


def test_step_metrics_average_over_ranks_and_responses():
    sums = {"rollout/responses": 8, "reward/sum": 4.0, "reward/accuracy_sum": 4.0, "reward/format_sum": 0.0,
            "rollout/online": 6, "reward/online_sum": 2.0, "response/tokens": 24, "response/finished": 8,
            "rollout/groups": 2, "rollout/dropped": 0, "rollout/failed": 0, "rollout/offline": 2,
            "frames/decoded": 0, "time/media_s": 0.4, "optim/steps": 2, "loss_sum": 0.3, "grad_norm_sum": 4.0,
            "train/tokens": 24, "entropy_sum": 12.0, "kl_sum": 2.4}
    m = step_metrics(sums, world=2)
    assert m["reward/mean"] == 0.5 and m["reward/online"] == 2 / 6 and m["response/length"] == 3
    assert m["loss"] == 0.3 and m["grad_norm"] == 2.0 and m["time/media_s"] == 0.2
    assert m["entropy"] == 0.5 and m["kl"] == pytest.approx(0.1) and "clipfrac_high" not in m


def test_without_a_bar_every_step_prints_its_place_in_the_run(tmp_path, caplog):
    # `make demo-rl` and launchers' logs run without the bar: a line per step, never minutes of silence.
    logger = MetricsLogger(tmp_path, LoggingConfig(progress=False), True, total_steps=12, start_step=0, run_config={})
    with caplog.at_level("INFO", logger="vbench_async.train.logger"):
        logger.log(3, {"reward/mean": 0.5, "reward/accuracy": 0.25, "loss": 0.0123, "time/step_s": 8.06,
                       "grad_norm": math.nan})
    logger.close()
    assert caplog.messages == ["step 3/12 reward=0.5 acc=0.25 loss=0.0123 s/step=8.06"]
