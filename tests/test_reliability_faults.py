"""Engine and server faults through `vbench-async run`.

- An OpenAI-compatible server that fails on purpose (a real HTTP server on 127.0.0.1, in a thread of this process:
  500s, 429s, hangs, bytes trickled past the timeout, dropped connections, malformed bodies) gets bounded retries,
  then a recorded failure per sample, and the run completes.
- A server nobody listens on, and a second run writing the same output directory, end with clear messages.
- Ctrl-C while results flow: exit 130, finished lines kept, a partial summary; the same command finishes the run.
- The vLLM engine core SIGKILLed mid-run stops the run cleanly: a clear message, exit code 3, every finished result
  kept, no stray processes, and the same command resumes to a complete run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from support.fault_server import ANSWER, RETRIES, TIMEOUT_S, FaultServer, fault_suite, openai_args, slow_run, wait_until
from support.processes import alive, descendants, wait_gone

from vbench_async.results.lines import read_lines

# mode -> (error kind or None, attempts the client must make)
FAULTS = {
    "ok": (None, 1),
    "e500": ("server_unavailable", RETRIES + 1),
    "e429": ("server_unavailable", RETRIES + 1),
    "e503x2": (None, 3),
    "e400": ("server_error", 1),
    "hang": ("server_unavailable", RETRIES + 1),
    "trickle": ("server_unavailable", RETRIES + 1),
    "close": ("server_unavailable", RETRIES + 1),
    "closex1": (None, 2),
    "garbage": ("server_error", 1),
    "shape": ("server_error", 1),
    "surrogate": (None, 1),
}


def _results(out: Path) -> dict[str, dict]:
    files = list((out / "results").glob("*.jsonl"))
    return {sid: r for f in files for sid, r in read_lines(f).items()}


def test_server_faults_get_bounded_retries_then_recorded_failures(tmp_path):
    modes = list(FAULTS)
    data_map = fault_suite(tmp_path / "data", modes)
    with FaultServer(ANSWER, hang_s=TIMEOUT_S * 3) as server:
        t0 = time.monotonic()
        proc = run_cli(*openai_args(data_map, tmp_path / "out", tmp_path / "cache", server.url), timeout=300)
        wall = time.monotonic() - t0
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    results = _results(tmp_path / "out")
    assert sorted(results) == sorted(f"q{i}-{m}" for i, m in enumerate(modes))
    for i, mode in enumerate(modes):
        kind, attempts = FAULTS[mode]
        r = results[f"q{i}-{mode}"]
        assert (r["error"] or {}).get("kind") == kind, (mode, r["error"])
        assert server.attempts[str(i)] == attempts, (mode, server.attempts[str(i)])
        if kind is None:
            assert r["output"] == (ANSWER if mode != "surrogate" else "bad ? text"), mode
    assert "gave up after 3 attempts" in results[f"q{modes.index('hang')}-hang"]["error"]["message"]
    assert "HTTP 500" in results[f"q{modes.index('e500')}-e500"]["error"]["message"]
    assert results[f"q{modes.index('ok')}-ok"]["score"] == 1.0
    # Bounded: hangs and trickles cost at most (retries + 1) x the timeout each, plus backoff, not forever.
    assert wall < 240, wall


def test_a_server_nobody_listens_on_fails_every_sample_quickly(tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data_map = fault_suite(tmp_path / "data", ["ok"] * 3)
    proc = run_cli(*openai_args(data_map, tmp_path / "out", tmp_path / "cache", f"http://127.0.0.1:{port}/v1"),
                   timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    results = _results(tmp_path / "out")
    assert len(results) == 3
    assert all(r["error"]["kind"] == "server_unavailable" and "ConnectError" in r["error"]["message"]
               for r in results.values())


@pytest.mark.slow  # the default suite has the refusal with another config (test_reliability_rundir), naming the pid
def test_a_second_run_into_the_same_output_dir_is_refused(tmp_path):
    with slow_run(tmp_path, 6) as (args, first, out):
        # The first run holds the result file's lock from its creation until it ends.
        wait_until(lambda: any((out / "results").glob("*.jsonl")), first)
        second = run_cli(*args, timeout=300)
        first.wait(timeout=300)
    assert second.returncode == 2, second.stderr[-3000:]
    assert "being written by another process" in second.stderr and "Traceback" not in second.stderr
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert len(_results(out)) == 6 and all(r["error"] is None for r in _results(out).values())


@pytest.mark.slow  # the default suite has Ctrl-C mid-run in test_reliability_interrupts and the resume in test_resume
def test_ctrl_c_mid_run_exits_130_keeps_finished_lines_and_the_same_command_finishes(tmp_path):
    """Ctrl-C while results flow (through a real HTTP server; the in-process engine's Ctrl-C during start-up is in
    tests/test_resume.py)."""
    with slow_run(tmp_path, 8) as (args, first, out):
        wait_until(lambda: len(_lines(out)) >= 3, first)
        before = _lines(out)
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)
        log_text = (tmp_path / "first.log").read_text()
        assert first.returncode == 130, log_text[-3000:]
        assert "interrupted" in log_text and "Traceback" not in log_text
        summary = json.loads((out / "summary.json").read_text())
        assert summary["complete"] is False and summary["run"]["interrupted"] is True
        kept = _lines(out)
        assert 3 <= len(kept) < 8 and kept[: len(before)] == before  # finished lines stay, untouched
        second = run_cli(*args, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert _lines(out)[: len(kept)] == kept
    assert sorted(_results(out)) == [f"q{i}-slow" for i in range(8)]


def _lines(out: Path) -> list[bytes]:
    """The finished result lines of a one-benchmark run, in file order."""
    files = list((out / "results").glob("*.jsonl"))
    return [line for line in files[0].read_bytes().splitlines(keepends=True) if line.endswith(b"\n")] if files else []


# ----------------------------------------------------------------------------------------------- the vLLM engine

FRONT_END = """
import subprocess, sys, time
from vbench_async.backends.guard import OrphanGuard
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # stands for an engine core
guard = OrphanGuard({engine.pid})
if sys.argv[1] == "disarm":
    guard.disarm()
print(engine.pid, flush=True)
time.sleep(600)
"""


LATE_CHILD = """
import subprocess, sys, time
from vbench_async.backends.guard import OrphanGuard
guard = OrphanGuard(watch_children=True)  # armed before the child exists, as the vLLM backend does
time.sleep(0.3)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # an engine core, mid start-up
print(child.pid, flush=True)
time.sleep(600)
"""


ADOPTED_CHILD = """
import os, subprocess, sys, time
from vbench_async.backends.guard import OrphanGuard
guard = OrphanGuard(watch_children=True)
time.sleep(1.2)  # the watcher's first looks find nothing
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # spawned just before Ctrl-C
guard.adopt_children()  # what the vLLM backend does on Ctrl-C during start-up
print(child.pid, flush=True)
os._exit(130)  # sooner than the watcher's next poll
"""


@pytest.mark.parametrize("script", [LATE_CHILD, ADOPTED_CHILD], ids=["polled", "adopted_before_a_quick_exit"])
def test_orphan_guard_stops_children_started_after_it(script, tmp_path):
    front = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    child = int(front.stdout.readline())
    if script is LATE_CHILD:
        time.sleep(1.5)  # the watcher polls twice a second
    front.kill()
    front.wait()
    try:
        assert wait_gone([child], 20) == [], "a child started after the guard outlived its killed parent"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("disarm", [False, True], ids=["killed", "disarmed"])
def test_orphan_guard_stops_the_engine_processes_of_a_killed_front_end(disarm, tmp_path):
    front = subprocess.Popen([sys.executable, "-c", FRONT_END, "disarm" if disarm else "armed"], cwd=REPO,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    engine = int(front.stdout.readline())
    guards = [p for p in descendants(front.pid) if p != engine]
    front.kill()  # SIGKILL: no handler, no atexit, nothing runs in the front end
    front.wait()
    try:
        assert wait_gone(guards, 20) == [], "the watcher must not linger"
        assert alive(engine) == disarm, "the guard must act only when the front end dies armed"
    finally:
        if alive(engine):
            os.kill(engine, signal.SIGKILL)
