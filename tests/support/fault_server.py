"""A fault-injecting OpenAI-compatible HTTP server on 127.0.0.1, and `vbench-async run` set up against it.

Shared by the tests of server faults, interrupts, run directories and path safety: the server answers each request
as its question's `FAULT=<mode>` marker says (errors, hangs, trickles, dropped connections, malformed bodies, slow
answers), so the openai backend meets real sockets and real timing.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

from conftest import REPO
from support.hostile import _good, _video, write_data_map

ANSWER = "<answer>A</answer>"
RETRIES = 2
TIMEOUT_S = 2.0


# ----------------------------------------------------------------------------------------------- a failing server


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 (an ephemeral port) serving `handler`, as a context manager; `url` is its
    OpenAI-compatible base URL."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultServer(LocalServer):
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

        self._serve(Handler)

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


def fault_suite(folder: Path, modes: list[str]) -> Path:
    _video(folder / "videos" / "good.mp4")
    records = [_good(f"q{i}-{mode}", problem=f"FAULT={mode}#{i} Which colour is the square?")
               for i, mode in enumerate(modes)]
    (folder / "faults.json").write_text(json.dumps(records))
    return write_data_map(folder, "faults.json")


def openai_args(data_map: Path, out: Path, cache: Path, url: str, *extra: str) -> list[str]:
    return ["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "mmvu", "--data-root", str(data_map),
            "--output-dir", str(out), "--cache-dir", str(cache), "--max-frames", "4", "--max-pixels", "16384",
            "--no-progress", "--no-site", "--backend", "openai", "--base-url", url, "--max-retries", str(RETRIES),
            "--request-timeout", str(TIMEOUT_S), *extra]


@contextlib.contextmanager
def slow_run(tmp_path: Path, questions: int) -> Iterator[tuple[list[str], subprocess.Popen, Path]]:
    """`vbench-async run` in the background against a FaultServer answering `questions` questions slowly, one at a
    time; yields (its arguments, its process, its output directory) while the server is up; kills it on the way out."""
    data_map = fault_suite(tmp_path / "data", ["slow"] * questions)
    out = tmp_path / "out"
    with FaultServer() as server:
        args = openai_args(data_map, out, tmp_path / "cache", server.url, "--concurrency", "1")
        with open(tmp_path / "first.log", "w") as log:
            first = subprocess.Popen([sys.executable, "-m", "vbench_async", *args], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT)
            try:
                yield args, first, out
            finally:
                if first.poll() is None:
                    first.kill()


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
