"""Checks a run makes before any work: which benchmarks have no data (one line, or one error when none has any), and
whether the frame cache can be written (an unwritable one stops the run at once, before a video is probed or
decoded)."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from ..errors import NoData
from ..failure_kinds import environment_fault, is_environment_oserror

log = logging.getLogger("vbench_async.evaluation.runner")  # the run's own logger: the console shows its warnings


def no_data(given_root: Path | str | None, not_run: dict[str, str], n: int, some_loaded: bool) -> None:
    """One warning naming the benchmarks without data (each one's reason is in the log at debug level); NoData when
    none of the `n` selected has any."""
    from ..benchmarks.sources import data_root

    root = data_root(given_root).root
    where = f"{root}" + ("" if root.is_dir() else " (that folder does not exist)")
    names = ", ".join(list(not_run)[:6]) + (f" and {len(not_run) - 6} more" if len(not_run) > 6 else "")
    if some_loaded:
        log.warning("not running %d of %d benchmarks, their data is not under %s: %s", len(not_run), n, where, names)
        return
    message = f"none of the {n} benchmark(s) selected has its data under {where}" if n > 1 else \
        next(iter(not_run.values()))
    raise NoData(message, str(root), not_run)


def check_writable(root: Path) -> None:
    """EnvironmentFault (exit 2) unless a file can be created in the frame cache `root`."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
            pass
    except OSError as exc:
        if is_environment_oserror(exc) or isinstance(exc, (NotADirectoryError, FileExistsError)):
            raise environment_fault("frame cache", root, exc) from exc
        raise
