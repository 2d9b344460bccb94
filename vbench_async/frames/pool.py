"""A thread-safe pool of long-lived decode worker processes, each job bounded by a timeout.

A worker that runs past the timeout is killed (and replaced on the next job), so a pathological file costs at most
`timeout_s` and never hangs the caller. A worker that dies (segfault in a decoder, out of memory) is reported as a
crash. Workers start lazily, up to `max_workers`, and run in their own session so Ctrl-C reaches only the parent.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

from ..failure_kinds import FailureKind
from ..worker_process import WorkerDied, WorkerProcess, WorkerStartError, WorkerTimedOut, package_env
from .decode_job import DecodeJob, DecodeReply
from .worker import DECODER_ENV, THREADS_ENV

__all__ = ["DecodePool", "WorkerStartError"]


def _start_worker(env: dict[str, str], startup_timeout_s: float) -> WorkerProcess:
    return WorkerProcess("vbench_async.frames.worker", env, startup_timeout_s, what="decode worker")


class DecodePool:
    def __init__(self, max_workers: int, timeout_s: float, decoder: str, startup_timeout_s: float = 180.0):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.timeout_s = timeout_s
        self._max = max_workers
        self._startup_timeout_s = startup_timeout_s
        self._decoder = decoder
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()
        self._live = 0
        self._closed = False
        self._cond = threading.Condition()

    def set_max_workers(self, n: int) -> None:
        with self._cond:
            self._max = max(1, n)
            self._cond.notify_all()

    def _env(self) -> dict[str, str]:
        threads = str(max(1, (os.cpu_count() or 1) // self._max))
        return package_env({THREADS_ENV: threads, DECODER_ENV: self._decoder, "OMP_NUM_THREADS": threads})

    def busy_pids(self) -> list[int]:
        """Process ids of the workers decoding right now."""
        with self._cond:
            return [w.pid for w in self._busy]

    def _acquire(self) -> WorkerProcess:
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
            worker = _start_worker(self._env(), self._startup_timeout_s)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._busy.add(worker)
        return worker

    def _release(self, worker: WorkerProcess, healthy: bool) -> None:
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

    def run(self, job: DecodeJob) -> DecodeReply:
        """Run one job; a timeout or crash comes back as a failed reply, with the worker's pid. RecordError: a reply
        that is not a `DecodeReply` (the worker is replaced)."""
        worker = self._acquire()
        healthy = False
        try:
            reply = DecodeReply.from_json(worker.request(job.to_json(), self.timeout_s), "decode worker reply")
            healthy = True
        except WorkerTimedOut:
            reply = DecodeReply(ok=False, kind=FailureKind.DECODE_TIMEOUT,
                                message=f"decoding took longer than {self.timeout_s:g} s; the worker was killed")
        except WorkerDied as exc:
            reply = DecodeReply(ok=False, kind=FailureKind.DECODER_CRASH,
                                message=f"decoder crashed: {exc}{worker.stderr_tail()}")
        finally:
            pid = worker.pid
            self._release(worker, healthy)
        return replace(reply, pid=pid)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
