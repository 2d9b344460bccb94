"""Locate the data folders (benchmark cards, leaderboard templates) in a checkout or an installed wheel."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the folder `name` ("benchmarks" or "leaderboards").

    A wheel carries them under vbench_async/_data/; a source checkout (editable install) has them at the
    repository root, next to the package.
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"vbench-async data folder {name!r} not found; is the package installed correctly?")
