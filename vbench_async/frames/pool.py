"""A thread-safe pool of long-lived decode worker processes, each job bounded by a timeout.

A worker that runs past the timeout is killed (and replaced on the next job), so a pathological file costs at most
`timeout_s` and never hangs the caller. A worker that dies (segfault in a decoder, out of memory) is reported as a
crash. Workers start lazily, up to `max_workers`, and run in their own session so Ctrl-C reaches only the parent.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .errors import DECODE_TIMEOUT, DECODER_CRASH
from .worker import DECODER_ENV, THREADS_ENV

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # lets `-m vbench_async...` work uninstalled


class WorkerStartError(RuntimeError):
    """A worker process could not start: a broken environment, not a bad video."""


class _TimedOut(Exception):
    pass


class _Died(Exception):
    pass


class _Worker:
    def __init__(self, env: dict[str, str], startup_timeout_s: float):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vbench_async.frames.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        try:
            hello = self._read(startup_timeout_s)
        except (_TimedOut, _Died) as exc:
            detail = f"{exc or 'no ready message in time'}{self.stderr_tail()}"
            self.kill()
            raise WorkerStartError(f"decode worker did not start: {detail}") from None
        if not hello.get("ready"):
            self.kill()
            raise WorkerStartError(f"decode worker sent {hello!r} instead of a ready message")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.stderr.seek(0)
        self.stderr.truncate()  # keep only this job's messages (the child shares the file offset)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise _Died(f"cannot send the job: {exc}") from None
        return self._read(timeout_s)

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _TimedOut()
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.proc.wait()
                    raise _Died(f"worker exited with code {code}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            self.stderr.seek(0)
            text = self.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f"; stderr: ...{text[-limit:]}" if text else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()


class DecodePool:
    def __init__(self, max_workers: int, timeout_s: float, decoder: str, startup_timeout_s: float = 180.0):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.timeout_s = timeout_s
        self._max = max_workers
        self._startup_timeout_s = startup_timeout_s
        self._decoder = decoder
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._live = 0
        self._closed = False
        self._cond = threading.Condition()

    def set_max_workers(self, n: int) -> None:
        with self._cond:
            self._max = max(1, n)
            self._cond.notify_all()

    def _env(self) -> dict[str, str]:
        threads = str(max(1, (os.cpu_count() or 1) // self._max))
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + path if path else "")
        env.update({THREADS_ENV: threads, DECODER_ENV: self._decoder, "OMP_NUM_THREADS": threads})
        return env

    def busy_pids(self) -> list[int]:
        """Process ids of the workers decoding right now."""
        with self._cond:
            return [w.pid for w in self._busy]

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                while not self._idle and self._live >= self._max and not self._closed:
                    self._cond.wait()
                if self._closed:
                    raise WorkerStartError("the decode pool is closed")
                if not self._idle:
                    self._live += 1
                    break
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    self._busy.add(worker)
                    return worker
                self._live -= 1  # died while idle (killed from outside): replace it
                worker.kill()
        try:
            worker = _Worker(self._env(), self._startup_timeout_s)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._busy.add(worker)
        return worker

    def _release(self, worker: _Worker, healthy: bool) -> None:
        with self._cond:
            self._busy.discard(worker)
            keep = healthy and not self._closed and self._live <= self._max
            if keep:
                self._idle.append(worker)
            else:
                self._live -= 1
            self._cond.notify()
        if not keep:
            worker.kill()

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """Run one job; a timeout or crash comes back as a failed reply ({"ok": false, "kind", "message"})."""
        worker = self._acquire()
        healthy = False
        try:
            reply = worker.request(job, self.timeout_s)
            healthy = True
        except _TimedOut:
            reply = {
                "ok": False,
                "kind": DECODE_TIMEOUT,
                "message": f"decoding took longer than {self.timeout_s:g} s; the worker was killed",
            }
        except _Died as exc:
            reply = {"ok": False, "kind": DECODER_CRASH, "message": f"decoder crashed: {exc}{worker.stderr_tail()}"}
        finally:
            pid = worker.pid
            self._release(worker, healthy)
        reply["pid"] = pid
        return reply

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
