"""Crash safety of `vbench-async run` with the in-process vLLM engine: one run, interrupted four ways in turn and each
time re-run with the same command, must end exactly as the uninterrupted run (`qwen25_runs` "a"): one result line per
sample, the same outputs and metrics, and every line written before an interruption left untouched.

  1. SIGKILL of every process of the run while the cold frame cache is being written: the cache stays valid
  2. Ctrl-C after some results: exit 130, finished results kept, a summary marked partial
  3. SIGKILL of the vLLM engine-core process alone: the run stops by itself (exit 3, a clear message), results kept
  4. SIGKILL of every process of the run mid-results
  5. the same command again: it runs what is left, and only that

One chain instead of one test per fault: each engine start-up costs half a minute on these CPUs. Twenty randomised
SIGKILL trials run under `pytest -m slow tests/test_reliability_crash.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

from conftest import DEMO_ARGS, ENGINE_GROUP, REPO, demo_ids, outputs, run_cli
from test_reliability_faults import command_line, descendants, wait_gone

pytestmark = [pytest.mark.vllm, ENGINE_GROUP]


class Run:
    """The demo run in one output directory and one (initially cold) cache, started as many times as needed."""

    def __init__(self, out: Path, cache: Path, logs: Path):
        self.out, self.cache, self.logs = out, cache, logs
        self.args = ["run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--no-site", "--output-dir", str(out),
                     "--cache-dir", str(cache)]
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> subprocess.Popen:
        self.starts += 1
        log = open(self.log, "w")  # a file, not a pipe: vLLM logs a lot while nobody reads
        self.proc = subprocess.Popen([sys.executable, "-m", "vbench_async", *self.args], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return self.proc

    @property
    def log(self) -> Path:
        return self.logs / f"start-{self.starts}.log"

    def files(self) -> dict[str, list[bytes]]:
        """Each result file's lines (a sample's line goes to its benchmark's file)."""
        files = sorted((self.out / "results").glob("*.jsonl")) if (self.out / "results").is_dir() else []
        return {f.name: f.read_bytes().splitlines(keepends=True) for f in files}

    def lines(self) -> list[bytes]:
        return [line for lines in self.files().values() for line in lines]

    def wait_until(self, what: str, ready: Callable[[], bool], timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                pytest.fail(f"the run ended (exit {self.proc.returncode}) before {what}:\n"
                            f"{self.log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            time.sleep(0.01)

    def kill_all(self) -> None:
        """SIGKILL the run and everything it started (a scheduler or the OOM killer taking the whole job)."""
        family = descendants(self.proc.pid)
        os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in family:  # anything that left the process group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        assert not wait_gone(family, 30)

    def engine_core(self) -> int:
        for pid in descendants(self.proc.pid):
            if "EngineCore" in command_line(pid):
                return pid
        return 0

    def assert_cache_valid(self) -> None:
        verify = run_cli("cache", "verify", "--cache-dir", str(self.cache))
        assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]

    def assert_kept(self, before: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
        """Every result file starts with its lines in `before` (finished lines are never rewritten; a torn last line
        may be cut on the next open), and no sample has two lines. Returns the files' lines now."""
        now = self.files()
        for name, lines in before.items():
            whole = [line for line in lines if line.endswith(b"\n")]
            assert now.get(name, [])[: len(whole)] == whole, name
        ids = Counter(json.loads(line)["sample_id"] for lines in now.values() for line in lines
                      if line.endswith(b"\n"))
        assert all(n == 1 for n in ids.values()), [k for k, n in ids.items() if n > 1]
        return now


def _count(files: dict[str, list[bytes]]) -> int:
    return sum(1 for lines in files.values() for line in lines if line.endswith(b"\n"))


def test_interrupted_four_ways_then_finished_equals_uninterrupted(qwen25_runs, tmp_path):
    reference = qwen25_runs[0] / "a"
    run = Run(tmp_path / "out", tmp_path / "cache", tmp_path)
    n_total = sum(len(v) for v in demo_ids().values())

    # 1. Killed while a decode worker writes the first cache entry.
    run.start()
    run.wait_until("a cache write", lambda: any(d.is_dir() for d in run.cache.glob("vbf1/entries/*")))
    run.kill_all()
    run.assert_cache_valid()
    seen = run.assert_kept({})

    # 2. Ctrl-C once results flow: exit 130, a partial summary.
    run.start()
    run.wait_until("5 result lines", lambda: len(run.lines()) >= _count(seen) + 5)
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.proc.wait(timeout=120) == 130, run.log.read_text(errors="replace")[-3000:]
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["complete"] is False and summary["run"].get("interrupted") is True
    seen = run.assert_kept(seen)

    # 3. The engine core dies mid-run: the run stops on its own with exit 3 and says what to do.
    run.start()
    run.wait_until("the engine core", lambda: run.engine_core() != 0)
    run.wait_until("3 more result lines", lambda: len(run.lines()) >= _count(seen) + 3)
    family = descendants(run.proc.pid)
    os.kill(run.engine_core(), signal.SIGKILL)
    code = run.proc.wait(timeout=300)  # must end by itself, not hang
    log = run.log.read_text(errors="replace")
    assert code == 3, log[-4000:]
    assert "the engine stopped" in log and "re-run the same command" in log
    assert not wait_gone(family, 60), "engine or decode processes outlived the run"
    seen = run.assert_kept(seen)
    assert all(json.loads(line)["error"] is None for line in run.lines()), "the engine's death is no sample's fault"

    # 4. Killed, every process at once, mid-results.
    run.start()
    run.wait_until("3 more result lines", lambda: len(run.lines()) >= _count(seen) + 3)
    run.kill_all()
    run.assert_cache_valid()
    seen = run.assert_kept(seen)
    assert _count(seen) < n_total, "the run finished before the last kill"

    # 5. The same command finishes the run: exactly the uninterrupted results.
    final = run_cli(*run.args)
    assert final.returncode == 0, final.stderr[-4000:]
    assert _count(run.assert_kept(seen)) == n_total
    assert outputs(run.out) == outputs(reference)
    got = json.loads((run.out / "summary.json").read_text())
    want = json.loads((reference / "summary.json").read_text())
    assert got["complete"] is True
    assert {b: got["benchmarks"][b]["score"] for b in want["benchmarks"]} == \
        {b: blk["score"] for b, blk in want["benchmarks"].items()}
    run.assert_cache_valid()
