"""A long-lived worker process that speaks JSON lines: `python -m MODULE`, one request a line on its stdin, one
answer a line on its stdout, its stderr in a file (never a pipe that chatty warnings could fill).

The worker first prints a ready message ({"ready": true, ...}); a worker that does not within the start-up timeout
raises WorkerStartError (a broken environment, not a bad input). A request past its timeout raises WorkerTimedOut
(the caller kills the worker), a worker that exits raises WorkerDied. Used by the frame decoders' pool and the math
checks. Workers run in their own session, so Ctrl-C reaches only the parent.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record_io import OutputRecord, RecordError

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])  # lets `-m vbench_async...` work uninstalled


def package_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the package importable (PYTHONPATH first) and `extra` set."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + path if path else "")
    env.update(extra or {})
    return env


@dataclass
class ReadyMessage(OutputRecord):
    """A worker's first line: it has imported what it needs and takes requests."""

    ready: bool = False
    pid: int | None = None


class WorkerStartError(RuntimeError):
    """A worker process could not start: a broken environment, not a bad input."""


class WorkerTimedOut(Exception):
    pass


class WorkerDied(Exception):
    pass


class WorkerProcess:
    def __init__(self, module: str, env: dict[str, str], startup_timeout_s: float, what: str = "worker"):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        try:
            hello = self._read(startup_timeout_s)
        except (WorkerTimedOut, WorkerDied) as exc:
            detail = f"{exc or 'no ready message in time'}{self.stderr_tail()}"
            self.kill()
            raise WorkerStartError(f"{what} did not start: {detail}") from None
        try:
            ready = ReadyMessage.from_json(hello, "the ready message").ready
        except RecordError:
            ready = False
        if not ready:
            self.kill()
            raise WorkerStartError(f"{what} sent {hello!r} instead of a ready message")

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
            raise WorkerDied(f"cannot send the job: {exc}") from None
        return self._read(timeout_s)

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimedOut()
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.proc.wait()
                    raise WorkerDied(f"worker exited with code {code}")
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
