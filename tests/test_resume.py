"""Crash safety of `vbench-async run`: SIGKILL or Ctrl-C part-way, re-run, and get exactly the uninterrupted results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import DEMO_ARGS, REPO, demo_ids, outputs, run_cli

pytestmark = pytest.mark.vllm


def _lines(run_dir: Path) -> list[dict]:
    out = []
    for f in (run_dir / "results").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def _start(run_dir: Path, cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vbench_async", "run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS,
         "--output-dir", str(run_dir), "--cache-dir", str(cache)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _wait_for_results(proc: subprocess.Popen, run_dir: Path, at_least: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"run ended before it could be interrupted: {proc.stderr.read()[-3000:]}")
        files = list((run_dir / "results").glob("*.jsonl")) if (run_dir / "results").exists() else []
        if sum(f.read_bytes().count(b"\n") for f in files) >= at_least:
            return
        time.sleep(0.05)
    pytest.fail("no results appeared in time")


def _assert_same_as_uninterrupted(run_dir: Path, reference: Path) -> None:
    counts = Counter(f"{r['benchmark']}/{r['sample_id']}" for r in _lines(run_dir))
    expected = {f"{b}/{i}" for b, ids in demo_ids().items() for i in ids}
    assert set(counts) == expected
    assert set(counts.values()) == {1}, [k for k, v in counts.items() if v > 1]
    assert outputs(run_dir) == outputs(reference)
    got = json.loads((run_dir / "summary.json").read_text())["benchmarks"]
    want = json.loads((reference / "summary.json").read_text())["benchmarks"]
    assert {b: got[b]["score"] for b in got} == {b: want[b]["score"] for b in want}


def test_sigkill_then_rerun_gives_uninterrupted_results(qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    run_dir = tmp_path / "killed"
    proc = _start(run_dir, tmp / "cache")
    _wait_for_results(proc, run_dir, at_least=5)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole tree: front end, engine core
    proc.wait()
    n_before = len(_lines(run_dir))
    assert 0 < n_before < sum(len(v) for v in demo_ids().values())
    rerun = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(run_dir),
                    "--cache-dir", str(tmp / "cache"))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    _assert_same_as_uninterrupted(run_dir, tmp / "a")


def test_ctrl_c_keeps_finished_results_and_marks_partial(qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    run_dir = tmp_path / "interrupted"
    proc = _start(run_dir, tmp / "cache")
    _wait_for_results(proc, run_dir, at_least=5)
    os.kill(proc.pid, signal.SIGINT)
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, proc.stderr.read()[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is False
    assert summary["run"].get("interrupted") is True
    rerun = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(run_dir),
                    "--cache-dir", str(tmp / "cache"))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    _assert_same_as_uninterrupted(run_dir, tmp / "a")
