"""Benchmark folders from outside the package: `--include DIR` and $VBENCH_ASYNC_INCLUDE.

A folder holds cards (`*.yaml`) and, optionally, suites (`suites/*.yaml`), laid out like the package's own
`benchmarks/` folder. The registry reads them after the built-in cards, with the same parser and the same checks; an
id that is already taken is an error naming both files, never a silent override.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from ..errors import UserError

INCLUDE_ENV = "VBENCH_ASYNC_INCLUDE"  # folders separated by os.pathsep (":" on Linux), like PATH

_added: list[Path] = []  # folders given with --include in this process (or by a server job)


def _folder(value: str | Path, where: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UserError(f"{where}: {value} is not a folder of benchmark cards")
    return path.resolve()


def add_include(*folders: str | Path) -> None:
    """Make the cards and suites of `folders` known to the registry for the rest of this process."""
    for value in folders:
        path = _folder(value, "--include")
        if path not in _added:
            _added.append(path)


@contextlib.contextmanager
def included(*folders: str | Path) -> Iterator[None]:
    """The cards and suites of `folders` known to the registry for the block only: a server job's folders must not
    outlive it (one with a card that clashes would otherwise fail every later job)."""
    before = list(_added)
    try:
        add_include(*folders)
        yield
    finally:
        _added[:] = before


def added() -> tuple[Path, ...]:
    """The folders added so far (cheap: a cache key of what the registry knows)."""
    return tuple(_added)


def include_dirs() -> list[Path]:
    """The extra folders: $VBENCH_ASYNC_INCLUDE's first, then those added with `add_include`, without repeats."""
    env = [_folder(p, f"${INCLUDE_ENV}") for p in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if p.strip()]
    out: list[Path] = []
    for path in (*env, *_added):
        if path not in out:
            out.append(path)
    return out
