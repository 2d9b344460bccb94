"""Which result lines count: those of the samples the annotation file holds now, and when a benchmark is complete.

A result file outlives edits to its annotation file: a record deleted, an id repaired. Lines of ids no longer
present are left out of every count (and listed, `stale_ids`, so the leaderboard leaves them out too); `complete`
means every current sample has a final line (a result, or a failure the input itself caused), and an interrupted
run is never complete. The summary, the table, the site, its exports and `judge` all decide it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping

from ..sample_result import Result, is_final

if TYPE_CHECKING:
    from .summary_record import BenchmarkSummary


def split_current(results: Iterable[Result], current_ids: Collection[str] | None
                  ) -> tuple[list[Result], list[str]]:
    """(lines of current samples, ids of the others). `current_ids` None: every line is current."""
    if current_ids is None:
        return list(results), []
    kept: list[Result] = []
    stale: list[Result] = []
    for r in results:
        (kept if r.sample_id in current_ids else stale).append(r)
    return kept, [r.sample_id for r in stale]


def drop_stale(results: Iterable[Result], block: BenchmarkSummary | Mapping[str, Any]) -> list[Result]:
    """The lines a summary block counts: without the stale ids it lists."""
    from .summary_record import BenchmarkSummary

    stale = set(BenchmarkSummary.of(block).stale_ids)
    return [r for r in results if r.sample_id not in stale] if stale else list(results)


def is_complete(results: Iterable[Result], n_expected: int, stored: bool = True) -> bool:
    """Every expected sample has a final line; `stored` False (an interrupted run) keeps it incomplete."""
    return complete_count(sum(1 for r in results if is_final(r)), n_expected, stored)


def complete_count(n_final: int, n_expected: int, stored: bool = True) -> bool:
    """`is_complete` from the number of final lines (a summary counts them as it reads the file)."""
    return bool(stored) and n_final >= n_expected
