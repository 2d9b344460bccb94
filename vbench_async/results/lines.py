"""What a result line must be, checked when it is written and when it is read: the one reader of result files.

A line a reader cannot trust (not JSON, not an object, a field of the wrong type, a score that is not a finite
number in [0, 1], a config hash other than its file's) is reported with its file and line number and left out, so
no count includes it and no command fails on it with a traceback. `leaderboard`, `compare`, `merge`, `judge`, the
summary and a resuming `run` all read through `read_lines` (via `store.read_results`). Judge verdict files
(`judge/`) hold a smaller record and are checked as such.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar, overload

from ..sample_result import failure_kind_of, result_problem
from .verdict_record import verdict_problem

log = logging.getLogger(__name__)
T = TypeVar("T")

# <benchmark>.<config hash>[.shard-K-of-N].jsonl: the hash every line of the file must carry.
_RESULT_FILE = re.compile(r"\.([0-9a-f]{12})(?:\.shard-\d+-of-\d+)?\.jsonl$")
JUDGE_DIRNAME = "judge"


@dataclass(frozen=True)
class BadLine:
    path: Path
    lineno: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.problem}"


class InvalidResult(ValueError):
    """A writer tried to store a line that readers would reject (a bug in the producer of the result)."""


def expected_hash(path: Path) -> str | None:
    """The config hash a result file's name promises (None for judge files and foreign names)."""
    if path.parent.name == JUDGE_DIRNAME:
        return None
    m = _RESULT_FILE.search(path.name)
    return m.group(1) if m else None


def line_problem(rec: Any, path: Path) -> str | None:
    """Why `rec` is not a valid line of the file at `path`, or None when it is."""
    if path.parent.name == JUDGE_DIRNAME:
        return verdict_problem(rec)
    return result_problem(rec, expected_hash(path))


def check_line(line: str, path: Path) -> None:
    """InvalidResult unless `line` (one serialised line) would be read back as a valid line of `path`."""
    problem = line_problem(json.loads(line), path)
    if problem is not None:
        raise InvalidResult(f"refusing to write an invalid line to {path}: {problem}")


@overload
def read_lines(path: Path, view: None = None, problems: list[BadLine] | None = None) -> dict[str, dict[str, Any]]: ...
@overload
def read_lines(path: Path, view: Callable[[dict[str, Any]], T], problems: list[BadLine] | None = None
               ) -> dict[str, T]: ...
def read_lines(path: Path, view: Callable[[dict[str, Any]], Any] | None = None,
               problems: list[BadLine] | None = None) -> dict[str, Any]:
    """Valid lines keyed by sample id (a retried sample's latest line wins, in first-seen order), each mapped through
    `view`. Every line left out is appended to `problems` and logged once per file, a last line without its newline
    too (torn by a crash mid-write, or edited by hand): a complete valid one still counts, with a warning naming file
    and line, and anything else is left out like any bad line (the next run into the directory cuts it, store.py)."""
    out: dict[str, Any] = {}
    for _, rec in iter_lines(path, problems):
        sid = rec["sample_id"]
        out.pop(sid, None)  # keep insertion order of the latest line
        out[sid] = view(rec) if view is not None else rec
    return out


def iter_lines(path: Path, problems: list[BadLine] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, line) of every valid line of `path`, in file order, retried samples' earlier lines included:
    `read_lines` without its dict, for a reader that picks the lines itself (results/streamed.py). Lines left out are
    reported as `read_lines` reports them, once the file is read to its end."""
    bad: list[BadLine] = []
    if not path.exists():
        return
    # Sample id -> the line that answered it. A run appends a second line for a sample only to retry a failure, so a
    # line replacing an answered one was added by hand or by another tool: it still counts (the latest line wins),
    # but never silently: the replaced line is reported like a bad line (logged, counted in n_bad_lines, marked).
    answered: dict[str, int] | None = {} if path.parent.name != JUDGE_DIRNAME else None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            last = not line.endswith("\n")  # only the last line can lack its newline
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                bad.append(BadLine(path, lineno, f"{TORN if last else 'not JSON'} ({exc})"))
                continue
            problem = line_problem(rec, path)
            if problem is not None:
                bad.append(BadLine(path, lineno, f"{TORN}: {problem}" if last else problem))
                continue
            if last:
                _warn_once(path, lineno, "the last line has no newline (edited by hand?); it is whole and counted")
            if answered is not None:
                sid = rec["sample_id"]
                first = answered.pop(sid, None)
                if first is not None:
                    bad.append(BadLine(path, first, f"sample {sid[:80]!r} answered here is replaced by line {lineno} "
                                                    "(a run never writes a second line for an answered sample: "
                                                    "appended by hand or by another tool?)"))
                if failure_kind_of(rec) is None:
                    answered[sid] = lineno
            yield lineno, rec
    if bad:
        _report(path, bad)
        if problems is not None:
            problems.extend(bad)


_REPORTED: set[tuple[str, int, str]] = set()  # one warning per bad line per process, however often it is read
TORN = "last line without its newline (torn by a crash, or edited)"


def _warn_once(path: Path, lineno: int, message: str) -> None:
    if (str(path), lineno, message) not in _REPORTED:
        _REPORTED.add((str(path), lineno, message))
        log.warning("%s:%d: %s", path, lineno, message)


def _report(path: Path, bad: list[BadLine]) -> None:
    new = [b for b in bad if (str(b.path), b.lineno, b.problem) not in _REPORTED]
    if not new:
        return
    _REPORTED.update((str(b.path), b.lineno, b.problem) for b in new)
    shown = "; ".join(f"line {b.lineno}: {b.problem}" for b in new[:5])
    more = f" (and {len(new) - 5} more)" if len(new) > 5 else ""
    log.warning("%s: %d invalid line(s) left out of every count: %s%s", path, len(new), shown, more)


def mark_bad_lines(block: dict[str, Any], bad: list[BadLine], limit: int = 20) -> None:
    """Note in a summary block how many lines were left out, and the first `limit` as "file:line: problem"."""
    block.pop("n_bad_lines", None)
    block.pop("bad_lines", None)
    if bad:
        block["n_bad_lines"], block["bad_lines"] = len(bad), [str(b) for b in bad[:limit]]
