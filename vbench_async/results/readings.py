"""The two readings of a benchmark's result lines, aggregated: the headline from the official reading (the
benchmark's own protocol), the robust score and the disagreements beside it, and the block summary.json holds.

The run's summary (streamed.py), a judge pass's recomputation, a merge and the leaderboard (summaries.py) all
aggregate here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..sample_result import READINGS, Result, as_results
from ..scoring.chance import chance_level
from .lines import BadLine, mark_bad_lines
from .stats import Estimate, headline_estimate

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark


# ----------------------------------------------------------------------------------------------- the two readings
# Every result line carries two readings of the output: `official`, the benchmark's own protocol, and `robust`, the
# careful grader (`Result.reading`, `Result.value_under`, `Result.seen_as`). The headline is aggregated from the
# official reading (comparable with papers); the robust score and the samples the two disagree on stand beside it.
# The run's summary, a judge pass's recomputation, a merge and the leaderboard all aggregate them here.


def reading_lines(results: Iterable[Result | Mapping[str, Any]], reading: str) -> list[Result]:
    """The lines as one reading scores them (`Result.seen_as`)."""
    return [Result.of(r).seen_as(reading) for r in results]


def readings_differ(r: Result) -> bool:
    """The line's official and robust readings give different scores (both readings present, both scored; a failed
    sample counts 0 under both)."""
    if r.failed or r.reading("official") is None or r.reading("robust") is None:
        return False
    o, b = r.value_under("official"), r.value_under("robust")
    return o is not None and b is not None and not math.isclose(o, b, abs_tol=1e-9)


def differing_ids(results: Iterable[Result | Mapping[str, Any]]) -> list[str]:
    """Sample ids of the lines whose readings give different scores (`readings_differ`). The sample browser lists
    these per benchmark."""
    return [r.sample_id for r in as_results(results) if readings_differ(r)]


def official_read(r: Result) -> bool:
    """The line has an official value, or its official reading waits for the judge."""
    rd = r.reading("official")
    return rd is not None and (rd.value is not None or rd.needs_judge)


def reading_basis(any_official: bool, any_robust: bool) -> str | None:
    """`headline_reading` from what the lines hold: some an official reading (`official_read`), some a robust one."""
    return "official" if any_official else "robust" if any_robust else None


def headline_reading(results: Iterable[Result]) -> str | None:
    """Which reading the headline rests on: "official" when any line has an official value (or waits for the
    official judge), "robust" when only the careful grader read the outputs (no official code), None for lines
    written before the two readings."""
    any_official = any_robust = False
    for r in results:
        any_official = any_official or official_read(r)
        any_robust = any_robust or r.reading("robust") is not None
    return reading_basis(any_official, any_robust)


def guessed(r: Result) -> bool:
    """The official protocol guessed the line's answer (it found none to read) and the sample did not fail."""
    rd = r.reading("official")
    return not r.failed and rd is not None and rd.guessed


def _interval(est: Estimate | None, score: Any) -> dict[str, Any] | None:
    """The headline's confidence interval as summary.json holds it (none for a headline that is empty or not a mean
    of sample scores)."""
    if est is None or not isinstance(score, (int, float)) or est.ci_low is None:
        return None
    return {"low": est.ci_low, "high": est.ci_high, "se": est.se, "level": est.level, "n_clusters": est.n_clusters}


@dataclass(frozen=True)
class ReadingEstimates:
    """Each reading's headline estimate (its interval), None where the headline is not a mean of sample scores."""

    official: Estimate | None = None
    robust: Estimate | None = None


@dataclass
class ReadingAggregate:
    """A benchmark's numbers under both readings: the official aggregate (the headline), the robust one, and each
    headline's estimate (for its interval)."""

    official: dict[str, Any]
    robust: dict[str, Any]
    estimates: ReadingEstimates
    differing: list[str]
    reading: str | None
    n_guessed: int
    chance: float | None = None  # scoring.chance_level: the score of a uniform guess among the options

    def block(self) -> dict[str, Any]:
        """The official aggregate with the robust score, the disagreement counts and both intervals beside it."""
        out = dict(self.official)
        out["reading"] = self.reading
        out["chance"] = self.chance
        interval = _interval(self.estimates.official, out["score"] if "score" in out else None)
        if interval:
            out["interval"] = interval
        if self.reading is not None:
            robust: dict[str, Any] = {k: self.robust[k] for k in ("score", "headline", "headline_status")
                                      if k in self.robust}
            robust_interval = _interval(self.estimates.robust, robust["score"] if "score" in robust else None)
            if robust_interval:
                robust["interval"] = robust_interval
            out["robust"] = robust
            out["n_readings_differ"] = len(self.differing)
            out["n_official_guessed"] = self.n_guessed
        return out


def aggregate_readings(benchmark: Benchmark, lines: Sequence[Result | Mapping[str, Any]]) -> ReadingAggregate:
    """Aggregate `results` under each reading with the benchmark's official aggregation."""
    results = as_results(lines)
    aggs, ests = {}, {}
    for reading in READINGS:
        seen = reading_lines(results, reading)
        aggs[reading] = benchmark.aggregate(seen)
        ests[reading] = headline_estimate(seen, benchmark.card.aggregation) if seen else None
        del seen  # one reading's copies of the lines at a time: at 100,000 lines each set is hundreds of MB
    return ReadingAggregate(aggs["official"], aggs["robust"], ReadingEstimates(**ests), differing_ids(results),
                            headline_reading(results), sum(1 for r in results if guessed(r)), chance_level(results))


def summary_block(aggregate: Mapping[str, Any], judge: dict[str, Any] | None, stale: list[str],
                  bad: list[BadLine]) -> dict[str, Any]:
    """A benchmark's aggregate as summary.json holds it (see `JudgedResults.summary_block`)."""
    block = {**aggregate, "judge": judge} if judge else dict(aggregate)
    if stale:
        block["n_stale"], block["stale_ids"] = len(stale), stale
    mark_bad_lines(block, bad)
    return block
