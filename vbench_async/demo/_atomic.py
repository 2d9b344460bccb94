"""Build a directory exactly once: in a temporary sibling, then renamed into place.

Used for the tiny models and the demo suite. Readers only ever see a finished directory (the rename is atomic on one
file system); concurrent builders are serialised by a lock file, and even without the lock the loser of the rename
race simply discards its copy. A build that returns without writing every file its caller requires (a writer that
silently skips writing, as transformers' `save_pretrained` does on ranks other than 0 once a process group exists)
raises instead of publishing the partial directory.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from ..homes import default_home  # noqa: F401 - re-exported (tiny models, demo suite)


class IncompleteBuild(RuntimeError):
    """A build returned without writing a file the finished directory must hold; nothing was published."""


def build_once(target: Path, build: Callable[[Path], None], required: Sequence[str] = ()) -> Path:
    """Return `target`, first calling `build(tmp_dir)` and renaming `tmp_dir` to `target` if it does not exist yet.

    `required` names files (relative paths or glob patterns) a finished build holds; one missing after `build`
    raises `IncompleteBuild` and the temporary directory is discarded."""
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
            missing = [name for name in required if not any(tmp.glob(name))]
            if missing:
                raise IncompleteBuild(f"building {target.name} wrote no {', '.join(missing)}; nothing was published")
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
