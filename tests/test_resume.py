"""Crash safety of `vbench-async run` with the in-process vLLM engine. The second run of `qwen25_runs` is interrupted
three ways in turn and started again each time with the same command (tests/support/interruptions.py):

  1. SIGKILL of every process of the run while the cold frame cache is being written: the cache stays valid
  2. Ctrl-C while the engine starts: exit 130 within seconds (not after the start-up), a summary marked partial, and
     the half-started engine core gone (Ctrl-C once results flow: tests/test_reliability_faults.py)
  3. SIGKILL of the vLLM engine-core process alone: the run stops by itself (exit 3, a clear message), results kept
  4. the same command finishes: one line per sample, the outputs and metrics of the uninterrupted run

Every step must leave the lines already on disk untouched, a cache that `cache verify` accepts, and no process
behind. Twenty randomised SIGKILL trials run under `pytest -m slow tests/test_reliability_crash.py`.
"""

from __future__ import annotations

import json

import pytest
from conftest import ENGINE_GROUP, demo_ids, outputs

pytestmark = [pytest.mark.vllm, ENGINE_GROUP]


def _step(qwen25_runs, name: str):
    return qwen25_runs[2].steps[name]


@pytest.mark.parametrize("name", ["cache_write", "ctrl_c", "engine_core", "finish"])
def test_every_step_keeps_finished_lines_and_a_valid_cache(qwen25_runs, name):
    step = _step(qwen25_runs, name)
    assert step.kept, f"{name}: lines written before the step changed, or a sample got two lines"
    assert step.cache_valid, f"{name}: `cache verify` rejected the cache"
    assert not step.stragglers, f"{name}: processes outlived the run: {step.stragglers}"
    assert step.lines_after >= step.lines_before


def test_sigkill_during_a_cache_write(qwen25_runs):
    step = _step(qwen25_runs, "cache_write")
    assert step.exit_code == -9 and step.lines_after == 0


def test_ctrl_c_during_engine_start_up_exits_at_once_with_a_partial_summary(qwen25_runs):
    step = _step(qwen25_runs, "ctrl_c")
    assert step.exit_code == 130, step.log
    assert step.seconds < 15, f"Ctrl-C took {step.seconds:.1f} s: the run waited for the engine to finish starting"
    assert step.summary["complete"] is False and step.summary["run"].get("interrupted") is True


def test_engine_core_death_stops_the_run_cleanly(qwen25_runs):
    step = _step(qwen25_runs, "engine_core")
    assert step.exit_code == 3, step.log
    assert "the engine stopped" in step.log and "re-run the same command" in step.log
    assert step.lines_after >= step.lines_before + 3
    lines = [json.loads(line) for f in (qwen25_runs[2].out / "results").glob("*.jsonl")
             for line in f.read_text().splitlines()]
    assert all(r["error"] is None for r in lines), "the engine's death is no sample's fault"


def test_the_finished_run_equals_the_uninterrupted_one(qwen25_runs):
    tmp, first, chain = qwen25_runs
    assert first.returncode == 0, first.stderr[-4000:]
    step = chain.steps["finish"]
    assert step.exit_code == 0, step.log
    n_total = sum(len(v) for v in demo_ids().values())
    assert chain.steps["engine_core"].lines_after < n_total, "the run finished before the last interruption"
    assert step.lines_after == n_total
    assert outputs(chain.out) == outputs(tmp / "a")
    got = json.loads((chain.out / "summary.json").read_text())
    want = json.loads((tmp / "a" / "summary.json").read_text())
    assert got["complete"] is True
    assert {b: blk["score"] for b, blk in got["benchmarks"].items()} == \
        {b: blk["score"] for b, blk in want["benchmarks"].items()}
