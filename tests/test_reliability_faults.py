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

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import pytest

from conftest import REPO, run_cli
from support.hostile import _good, _video, write_data_map
from support.processes import alive, descendants, wait_gone
from vbench_async.results.store import read_results

ANSWER = "<answer>A</answer>"
RETRIES = 2
TIMEOUT_S = 2.0


# ----------------------------------------------------------------------------------------------- a failing server


class FaultServer:
    """An OpenAI-compatible chat server on 127.0.0.1, in a thread, that answers `answer` unless the question says
    `FAULT=<mode>#<n>`: then it misbehaves as `respond` says. Counts the attempts per n."""

    def __init__(self, answer: str = "<answer>A</answer>", hang_s: float = 6.0) -> None:
        self.answer, self.hang_s = answer, hang_s
        self.attempts: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][0]["content"][-1]["text"]
                m = re.search(r"FAULT=(\w+)#(\d+)", text)
                mode, tag = (m.group(1), m.group(2)) if m else ("ok", "-")
                with server._lock:
                    server.attempts[tag] += 1
                    attempt = server.attempts[tag]
                try:
                    server.respond(self, mode, attempt)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing left to say

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FaultServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def _send(handler, status: int, body: bytes, content_type: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def respond(self, h, mode: str, attempt: int) -> None:
        ok = json.dumps({"choices": [{"message": {"content": self.answer}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode()
        if mode in ("e500", "e429", "e400"):
            return self._send(h, int(mode[1:]), b'{"error": "injected"}')
        if mode == "e503x2" and attempt <= 2:
            return self._send(h, 503, b'{"error": "warming up"}')
        if mode == "hang":
            time.sleep(self.hang_s)
            return self._send(h, 200, ok)
        if mode == "trickle":  # headers at once, then one byte every 0.3 s: each read is quick, the whole is not
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(ok)))
            h.end_headers()
            for i in range(len(ok)):
                h.wfile.write(ok[i:i + 1])
                h.wfile.flush()
                time.sleep(0.3)
            return None
        if mode == "close" or (mode == "closex1" and attempt == 1):
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)  # no status line at all
            return None
        if mode == "garbage":
            return self._send(h, 200, b"<html>this is not json</html>", "text/html")
        if mode == "shape":
            return self._send(h, 200, b'{"choices": "A", "usage": [1, 2]}')
        if mode == "surrogate":
            return self._send(h, 200, b'{"choices": [{"message": {"content": "bad \\ud800 text"}}]}')
        if mode == "slow":
            time.sleep(1.0)
        return self._send(h, 200, ok)


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


def _fault_suite(folder: Path, modes: list[str]) -> Path:
    _video(folder / "videos" / "good.mp4")
    records = [_good(f"q{i}-{mode}", problem=f"FAULT={mode}#{i} Which colour is the square?")
               for i, mode in enumerate(modes)]
    (folder / "faults.json").write_text(json.dumps(records))
    return write_data_map(folder, "faults.json")


def _openai_args(data_map: Path, out: Path, cache: Path, url: str, *extra: str) -> list[str]:
    return ["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "mmvu", "--data-root", str(data_map),
            "--output-dir", str(out), "--cache-dir", str(cache), "--max-frames", "4", "--max-pixels", "16384",
            "--no-progress", "--no-site", "--backend", "openai", "--base-url", url, "--max-retries", str(RETRIES),
            "--request-timeout", str(TIMEOUT_S), *extra]


def _results(out: Path) -> dict[str, dict]:
    files = list((out / "results").glob("*.jsonl"))
    return {sid: r for f in files for sid, r in read_results(f).items()}


def test_server_faults_get_bounded_retries_then_recorded_failures(tmp_path):
    modes = list(FAULTS)
    data_map = _fault_suite(tmp_path / "data", modes)
    with FaultServer(ANSWER, hang_s=TIMEOUT_S * 3) as server:
        t0 = time.monotonic()
        proc = run_cli(*_openai_args(data_map, tmp_path / "out", tmp_path / "cache", server.url), timeout=300)
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
    data_map = _fault_suite(tmp_path / "data", ["ok"] * 3)
    proc = run_cli(*_openai_args(data_map, tmp_path / "out", tmp_path / "cache", f"http://127.0.0.1:{port}/v1"),
                   timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    results = _results(tmp_path / "out")
    assert len(results) == 3
    assert all(r["error"]["kind"] == "server_unavailable" and "ConnectError" in r["error"]["message"]
               for r in results.values())


@contextlib.contextmanager
def _slow_run(tmp_path: Path, questions: int) -> Iterator[tuple[list[str], subprocess.Popen, Path]]:
    """`vbench-async run` in the background against a FaultServer answering `questions` questions slowly, one at a
    time; yields (its arguments, its process, its output directory) while the server is up; kills it on the way out."""
    data_map = _fault_suite(tmp_path / "data", ["slow"] * questions)
    out = tmp_path / "out"
    with FaultServer() as server:
        args = _openai_args(data_map, out, tmp_path / "cache", server.url, "--concurrency", "1")
        with open(tmp_path / "first.log", "w") as log:
            first = subprocess.Popen([sys.executable, "-m", "vbench_async", *args], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT)
            try:
                yield args, first, out
            finally:
                if first.poll() is None:
                    first.kill()


def _wait(ready: Callable[[], bool], proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)


def test_a_second_run_into_the_same_output_dir_is_refused(tmp_path):
    with _slow_run(tmp_path, 6) as (args, first, out):
        # The first run holds the result file's lock from its creation until it ends.
        _wait(lambda: any((out / "results").glob("*.jsonl")), first)
        second = run_cli(*args, timeout=300)
        first.wait(timeout=300)
    assert second.returncode == 2, second.stderr[-3000:]
    assert "being written by another process" in second.stderr and "Traceback" not in second.stderr
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert len(_results(out)) == 6 and all(r["error"] is None for r in _results(out).values())


def test_ctrl_c_mid_run_exits_130_keeps_finished_lines_and_the_same_command_finishes(tmp_path):
    """Ctrl-C while results flow (through a real HTTP server; the in-process engine's Ctrl-C during start-up is in
    tests/test_resume.py)."""
    with _slow_run(tmp_path, 8) as (args, first, out):
        _wait(lambda: len(_lines(out)) >= 3, first)
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


def test_orphan_guard_stops_children_started_after_it(tmp_path):
    front = subprocess.Popen([sys.executable, "-c", LATE_CHILD], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    child = int(front.stdout.readline())
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
