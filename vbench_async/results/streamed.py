"""A result file aggregated without holding its lines whole: the path of every summary.json block.

`summaries.judged_aggregate` reads a file into a list of results and aggregates it (the leaderboard keeps those lines
for its sample pages). A summary needs only the numbers, and at 100,000 lines the list alone is hundreds of MB: lines
awaiting the LLM judge must stay whole there, since the judge's answer hash reads their output. Here the file is read
once per question asked of it, and each line is reduced as it is read:

    1. the facts that compare the two readings (`_facts`: an int of flags per line): which lines settle their sample,
       disagree between the readings, were guessed, were judged; which reading the headline rests on;
    2. each reading in turn: every line judged (the active judge's verdict, line by line), seen through the reading
       (`Result.seen_as`) and cut to what aggregation reads (`_Shrink`: no text, no frames; strings and small dicts
       shared with the other lines), then aggregated, then dropped before the next reading is read.

The lines, their order and the aggregation are those of `judged_aggregate`, so are the numbers
(tests/test_summary_streamed.py holds the two paths together). A file is not written while it is summarised: a run,
a judge pass and a merge each hold the run directory's lock.
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping

from ..sample_result import READINGS, Result, is_final
from ..scoring.chance import chance_level
from .current import complete_count
from .lines import BadLine, iter_lines
from .readings import (
    ReadingAggregate,
    ReadingEstimates,
    guessed,
    official_read,
    reading_basis,
    readings_differ,
    summary_block,
)
from .stats import Estimate, headline_estimate
from .summary_record import BenchmarkSummary
from .verdict_record import Verdict
from .verdicts import (
    JUDGE_FAILED,
    JUDGED,
    UNJUDGED,
    active_judge,
    judge_info,
    judge_line,
    judge_store,
    verdicts_to_apply,
)

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark

log = logging.getLogger(__name__)

# A line's facts as the flags of one small int (CPython keeps one object per int up to 256: no allocation per line).
_FINAL, _DIFFER, _OFFICIAL, _ROBUST, _GUESSED, _NEEDS_JUDGE = 1, 2, 4, 8, 16, 32
_OUTCOMES = {None: 0, JUDGED: 64, JUDGE_FAILED: 128, UNJUDGED: 192}  # two bits: what the judge did to the line
_OUTCOME_MASK = 192
# Aggregation kinds that parse a line's answer and extraction again (benchmarks/aggregate.py `_stvg_item`, for lines
# written before the scorer stored its IoUs): only their lines keep those texts.
_REPARSED = frozenset({"stvg"})


@dataclass
class StreamedAggregate:
    """A result file's summary block (`JudgedResults.summary_block()`'s) and how many of its current lines settle
    their sample (`sample_result.is_final`), for `complete`."""

    block: dict[str, Any]
    n_final: int

    def complete(self, n_expected: int, stored: bool = True) -> bool:
        return complete_count(self.n_final, n_expected, stored)


def streamed_aggregate(run_dir: Path, benchmark: Benchmark, results_path: Path,
                       current_ids: Collection[str] | None = None,
                       block: BenchmarkSummary | Mapping[str, Any] | None = None) -> StreamedAggregate:
    """`judged_aggregate(run_dir, benchmark, results_path, current_ids=..., block=...)`'s summary block, with the
    file read line by line (see the module's docstring). Only lines of `current_ids` count (None: all of them), less
    the stale ids a stored summary `block` lists."""
    judge = _Judge(Path(run_dir), Path(results_path))
    stored = BenchmarkSummary.of(block) if block is not None else None
    listed = set(stored.stale_ids) if stored is not None else set()

    def current(sid: str) -> bool:
        return (current_ids is None or sid in current_ids) and sid not in listed

    bad: list[BadLine] = []
    facts, skip = _read_facts(results_path, judge, current, bad)
    stale = [sid for sid in facts if current_ids is not None and sid not in current_ids]
    if stored is not None:
        stale = list(stored.stale_ids)
    elif stale:
        log.warning("%s: %d line(s) of samples no longer in the annotation file left out: %s", results_path,
                    len(stale), ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""))
    tally = _Tally.of(facts, current)
    del facts
    aggs: dict[str, dict[str, Any]] = {}
    ests: dict[str, Estimate | None] = {}
    chance = None
    texts = benchmark.card.aggregation.kind in _REPARSED
    for reading in READINGS:  # one reading's lines in memory at a time
        seen = _seen(results_path, reading, judge, skip, texts)
        aggs[reading] = benchmark.aggregate(seen)
        ests[reading] = headline_estimate(seen, benchmark.card.aggregation) if seen else None
        if reading == READINGS[0]:
            chance = chance_level(seen)  # task types and option counts: the same under either reading
        del seen
    readings = ReadingAggregate(aggs["official"], aggs["robust"], ReadingEstimates(**ests), tally.differing,
                                reading_basis(tally.any_official, tally.any_robust), tally.n_guessed, chance)
    return StreamedAggregate(summary_block(readings.block(), judge.info(tally), stale, bad), tally.n_final)


@dataclass
class _Tally:
    """The facts of the current lines, summed (the per-line flags are dropped before any reading is read)."""

    differing: list[str]  # ids whose readings differ, in file order
    any_official: bool
    any_robust: bool
    n_guessed: int
    n_final: int
    any_needs_judge: bool
    outcomes: dict[str, int]  # what the judge did: JUDGED, JUDGE_FAILED, UNJUDGED -> lines

    @classmethod
    def of(cls, facts: Mapping[str, int], current: Callable[[str], bool]) -> _Tally:
        t = cls([], False, False, 0, 0, False, {name: 0 for name in _OUTCOMES if name is not None})
        by_flag = {flag: name for name, flag in _OUTCOMES.items() if name is not None}
        for sid, packed in facts.items():
            if not current(sid):
                continue
            bits = packed & 0xFF
            if bits & _DIFFER:
                t.differing.append(sid)
            t.any_official = t.any_official or bool(bits & _OFFICIAL)
            t.any_robust = t.any_robust or bool(bits & _ROBUST)
            t.n_guessed += bool(bits & _GUESSED)
            t.n_final += bool(bits & _FINAL)
            t.any_needs_judge = t.any_needs_judge or bool(bits & _NEEDS_JUDGE)
            if bits & _OUTCOME_MASK:
                t.outcomes[by_flag[bits & _OUTCOME_MASK]] += 1
        return t


def _read_facts(path: Path, judge: _Judge, current: Callable[[str], bool], bad: list[BadLine]
                ) -> tuple[dict[str, int], set[int]]:
    """Sample id -> the number of its latest line << 8 | that line's flags (`_facts`), in `read_lines`' order; and the
    numbers of the lines the readings leave out: replaced by a later line of their sample, or not current."""
    facts: dict[str, int] = {}
    skip: set[int] = set()
    for lineno, line in iter_lines(path, bad):
        earlier = facts.pop(line["sample_id"], None)
        if earlier is not None:
            skip.add(earlier >> 8)
        facts[line["sample_id"]] = lineno << 8 | _facts(line, judge)
    skip.update(packed >> 8 for sid, packed in facts.items() if not current(sid))
    return facts, skip


def _facts(line: dict[str, Any], judge: _Judge) -> int:
    """What the summary counts of one line beyond its aggregates, as flags (see `summaries` for each)."""
    raw = Result.read(line)
    r, outcome = judge(raw)
    return (_FINAL * is_final(r) | _DIFFER * readings_differ(r) | _OFFICIAL * official_read(r)
            | _ROBUST * (r.reading("robust") is not None) | _GUESSED * guessed(r) | _NEEDS_JUDGE * raw.needs_judge()
            | _OUTCOMES[outcome])


def _seen(path: Path, reading: str, judge: _Judge, skip: Collection[int], texts: bool) -> list[Result]:
    """The lines of `path` but those numbered in `skip`, judged, as `reading` scores them, shrunk (`_Shrink`), in file
    order: `read_lines`' lines and order (each sample's latest line), with no dict of them all."""
    shrink = _Shrink(texts)
    return [shrink(judge(Result.read(line))[0].seen_as(reading))
            for lineno, line in iter_lines(path) if lineno not in skip]


class _Judge:
    """The active judge's verdicts on one result file (`verdicts.judge_line`), read when a line first needs one."""

    def __init__(self, run_dir: Path, results_path: Path) -> None:
        self.run_dir = run_dir
        self.identity = active_judge(run_dir)
        self.store = judge_store(run_dir, results_path, str(self.identity.key)) if self.identity else None
        self._verdicts: dict[str, Verdict] | None = None

    def __call__(self, r: Result) -> tuple[Result, str | None]:
        if self.store is None:
            return r, None
        if self._verdicts is None and r.needs_judge():
            self._verdicts = verdicts_to_apply(self.store)
        return judge_line(r, self._verdicts or {})

    def info(self, tally: _Tally) -> dict[str, Any] | None:
        """The summary's "judge" block over the current lines (`verdicts.apply_active_judge`'s): None when no judge
        ran or no current line needs one."""
        if self.identity is None or self.store is None or not tally.any_needs_judge:
            return None
        info = judge_info(self.identity, tally.outcomes)
        info["file"] = str(self.store.path.relative_to(self.run_dir))
        return info


class _Shrink:
    """A line seen through one reading, cut to what aggregation reads: the prompt, question, output and frames are
    dropped (of the options only their count stays: the chance level reads it), the completion's counts too, and the
    reference answer and the extracted one unless the aggregation parses them again (`texts`); short strings are
    interned and the small dicts (fields, details, readings, error) shared between lines that hold the same ones, so a
    line costs its record, its id and little else."""

    _BOUND = 65536  # shared dicts kept at most (a file whose every line differs must not grow the table without end)

    def __init__(self, texts: bool = True) -> None:
        self.texts = texts
        self._dicts: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._options: dict[int, list[str]] = {}

    def __call__(self, r: Result) -> Result:
        return replace(
            r, benchmark=_text(r.benchmark), config_hash=_text(r.config_hash), task_type=_text(r.task_type),
            question="", options=self._blank_options(len(r.options)), answer=_text(r.answer) if self.texts else "",
            video=_text(r.video), fields=self._dict(r.fields), prompt="", output=None,
            extracted=_text(r.extracted) if self.texts else None, score=_number(r.score),
            details=self._dict(r.details), official=self._dict(r.official), robust=self._dict(r.robust),
            error=self._dict(r.error), frames=None, prompt_tokens=None, output_tokens=None, finish_reason=None,
            latency_s=None, line_score=_number(r.line_score))

    def _blank_options(self, n: int) -> list[str]:
        found = self._options.get(n)
        if found is None:
            found = self._options[n] = [""] * n  # read, never written: one list per option count
        return found

    def _dict(self, d: Any) -> Any:
        """`d`, or an equal dict already seen (same keys, values of the same types and signs): dicts of scalars only,
        which no reader of a line writes to."""
        if not isinstance(d, dict):
            return d
        try:
            key = tuple((k, *_scalar_key(v)) for k, v in d.items())
            shared = self._dicts.get(key)
        except TypeError:  # a nested list or dict: this line's own
            return d
        if shared is None:
            if len(self._dicts) >= self._BOUND:
                self._dicts.clear()
            shared = self._dicts[key] = d
        return shared


def _scalar_key(v: Any) -> tuple[Any, ...]:
    """What makes two JSON scalars interchangeable: the type (1, 1.0 and True are equal, not the same) and, for a
    zero, its sign (-0.0 == 0.0)."""
    if isinstance(v, (dict, list)):
        raise TypeError("not a scalar")
    return (type(v), v, math.copysign(1.0, v)) if isinstance(v, float) and v == 0.0 else (type(v), v)


def _text(s: Any) -> Any:
    return sys.intern(s) if isinstance(s, str) and len(s) <= 64 else s


_ZERO, _ONE = 0.0, 1.0


def _number(x: Any) -> Any:
    """The two scores nearly every line holds, as one object each (a float parsed from JSON is a new one)."""
    if type(x) is float:
        if x == 1.0:
            return _ONE
        if x == 0.0 and math.copysign(1.0, x) > 0:
            return _ZERO
    return x
