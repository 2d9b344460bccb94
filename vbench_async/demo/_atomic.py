"""Build a directory exactly once: in a temporary sibling, then renamed into place.

Used for the tiny models and the demo suite. Readers only ever see a finished directory (the rename is atomic on one
file system); concurrent builders are serialised by a lock file, and even without the lock the loser of the rename
race simply discards its copy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def default_home() -> Path:
    """Where built artifacts live: `$VBENCH_ASYNC_HOME`, else `~/.cache/vbench-async`."""
    env = os.environ.get("VBENCH_ASYNC_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vbench-async"


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """Return `target`, first calling `build(tmp_dir)` and renaming `tmp_dir` to `target` if it does not exist yet."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if target.is_dir():  # another process finished while we waited
            return target
        # We hold the lock, so any temp dir left for this target is from a crashed build.
        for stale in target.parent.glob(f".{target.name}.*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        try:
            build(tmp)
            for path in tmp.rglob("*"):  # some writers create private files; the cache may be shared
                path.chmod(0o755 if path.is_dir() else 0o644)
            try:
                os.rename(tmp, target)
            except OSError:
                if not target.is_dir():  # a real failure, not a lost race
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
