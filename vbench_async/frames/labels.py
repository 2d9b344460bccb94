"""Which benchmarks use which entries, for `cache stats` by benchmark.

Entries are content-addressed, so one entry may serve several benchmarks. Each run (or preprocess) writes the set
of keys it used for a benchmark as one file named after the set's hash: writers never append to a shared file,
so concurrent processes and machines cannot lose each other's labels, and the same set written twice is one file.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from .entry_file import TMP_PREFIX, read_regular_text
from .layout import CacheLayout, write_text_atomic

UNLABELLED = "(unlabelled)"


def record_labels(layout: CacheLayout, benchmark: str, keys: Iterable[str]) -> None:
    """Note that `benchmark` uses these keys. Best effort: a read-only cache records nothing."""
    unique = sorted(set(keys))
    if not unique:
        return
    name = hashlib.blake2b("\n".join(unique).encode(), digest_size=12).hexdigest()
    path = layout.labels / _folder(benchmark) / f"{name}.keys"
    if path.exists():
        return
    try:
        write_text_atomic(path, benchmark + "\n" + "\n".join(unique) + "\n")
    except OSError:
        pass


def keys_by_benchmark(layout: CacheLayout) -> dict[str, set[str]]:
    """Benchmark id -> every key any run recorded for it."""
    out: dict[str, set[str]] = {}
    for path in sorted(layout.labels.glob("*/*.keys")):
        if path.name.startswith(TMP_PREFIX):
            continue
        try:
            lines = read_regular_text(path).splitlines()  # a FIFO in its place is skipped, not a hang
        except OSError:
            continue
        if lines:
            out.setdefault(lines[0], set()).update(k for k in lines[1:] if k)
    return out


def _folder(benchmark: str) -> str:
    return re.sub(r"[^A-Za-z0-9@._-]", "_", benchmark)[:100] or "_"
