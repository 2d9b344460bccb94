"""Compression off the critical path: a run's new entries are written raw, then compressed by one background
process at the lowest CPU priority (SCHED_IDLE where the OS has it, else nice 19).

Compressing in the decode workers cost a cold run 11-17 s of 41-48 s on 2 cores (prediction + zstd run at a few
tens of MB/s of frames, competing with the engine's start-up). Raw writes cost nothing; the compactor only gets CPU
nobody else wants (GPU runs leave most of it idle), rewrites each entry atomically after checking its encoding in
memory (maintenance.compact_entry), and is stopped when the cache closes: what it did not reach stays raw, a valid
entry that the next run using it queues again, or `vbench-async cache compact` rewrites.

Protocol: `python -m vbench_async.frames.compactor CODEC`, one entry path per stdin line; exits when stdin closes
or on SIGTERM/SIGINT (a rewrite in progress is a temporary file, removed on the way out).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


class Compactor:
    """The parent side: started on the first `submit`, each path sent once, stopped by `close`."""

    def __init__(self, codec: str):
        self.codec = codec
        self._proc: subprocess.Popen | None = None
        self._sent: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, path: Path) -> None:
        with self._lock:
            if self._closed or str(path) in self._sent:
                return
            self._sent.add(str(path))
            try:
                if self._proc is None:
                    env = dict(os.environ)
                    env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"]
                                                           if env.get("PYTHONPATH") else "")
                    self._proc = subprocess.Popen([sys.executable, "-m", "vbench_async.frames.compactor", self.codec],
                                                  stdin=subprocess.PIPE, env=env)
                assert self._proc.stdin is not None
                self._proc.stdin.write(f"{path}\n".encode())
                self._proc.stdin.flush()
            except OSError:  # could not start, or it died: the entry simply stays raw (valid)
                self._closed = True

    def close(self, wait_s: float = 0.0) -> None:
        """Stop it (after up to `wait_s` seconds for the queue to drain: tests and `preprocess`-like callers)."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            proc.wait(timeout=wait_s) if wait_s > 0 else None
        except subprocess.TimeoutExpired:
            pass
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _lowest_priority() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(19)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    _lowest_priority()

    def stop(*_: object) -> None:
        raise SystemExit(0)  # unwinds through write_entry, which removes its temporary file

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)  # Ctrl-C at the run's console reaches it too: leave quietly
    from .maintenance import compact_entry

    codec = argv[0]
    for line in sys.stdin:
        path = Path(line.strip())
        if line.strip():
            try:
                compact_entry(path, codec)
            except Exception as exc:  # one entry's problem never stops the rest: it stays as it was
                print(f"compactor: {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
