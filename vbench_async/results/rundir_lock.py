"""One writer per run directory: `run` holds an exclusive lock on `<run_dir>/.run.lock` while it writes, whatever its
config, so a second run into the same directory (another `--max-tokens`, another model) is refused instead of
interleaving its summary and manifest with the first one's. The shards of one sharded run share the directory by
design: each takes the lock shared, which still refuses an unsharded run (and an unsharded run refuses them).

The lock is an flock, released by the kernel when its holder dies (a SIGKILLed run never leaves a stale lock); the
file also says who holds it, so the refusal can name the running command.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import IO

from ..errors import UserError
from ..redact import redact_argv

LOCK_FILE = ".run.lock"


class RunDirBusy(UserError):
    """Another process is writing the run directory (the CLI prints this and exits 2)."""


class RunDirLock:
    def __init__(self, run_dir: Path, shared: bool = False):
        self.path = Path(run_dir) / LOCK_FILE
        self.shared = shared
        self._fh: IO[str] | None = None

    def acquire(self) -> RunDirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fh)
            fh.close()
            raise RunDirBusy(f"{self.path.parent} is being written by another process ({holder}); wait for it to "
                             "finish or choose another --output-dir") from None
        if not self.shared:  # shards share the lock: the first one's note stays (they are one run)
            note = json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                               "command": " ".join(redact_argv(sys.argv))}) + "\n"
            try:  # unbuffered: nothing is left to flush (and fail) when the file is closed
                os.ftruncate(fh.fileno(), 0)
                os.write(fh.fileno(), note.encode("utf-8", "replace"))
            except OSError:
                pass  # a full disk: the lock holds without its note (the run then stops with its own message)
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            if not self.shared:
                os.ftruncate(self._fh.fileno(), 0)  # the note names a running command; none runs now
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fh: IO[str]) -> str:
    """Who holds the lock, from the note it wrote (best effort: an older holder may have written none)."""
    try:
        fh.seek(0)
        note = json.loads(fh.readline() or "{}")
        command = " ".join(redact_argv(str(note["command"]).split(" ")))  # a note an older release wrote has keys
        return f"pid {note['pid']}, started {note['started']}: {command}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a sharded run, or one that left no note"
