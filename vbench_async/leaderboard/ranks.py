"""Ranks on the board: the rank by a view's average score (#) and the average of a run's ranks over the view's
benchmarks (avg rank, as the Open VLM Video Leaderboard ranks models). Both are dense ranks: 1 = best, equal scores
share a rank, the next score gets the next rank."""

from __future__ import annotations

from typing import Any, Sequence

from .tables import ScoreCell


def dense_ranks(scores: Sequence[float | None]) -> list[int | None]:
    """Per score its rank (1 = the highest); None for a missing score."""
    place = {s: i + 1 for i, s in enumerate(sorted({s for s in scores if s is not None}, reverse=True))}
    return [place[s] if s is not None else None for s in scores]


def column_scores(grid: Sequence[dict[str, Any]], column: str) -> list[float | None]:
    """Each board row's score in column `column` (an id); None where it has none."""
    return [ScoreCell.of(cell).score if (cell := row["cells"].get(column)) else None for row in grid]


def average_ranks(grid: Sequence[dict[str, Any]], members: Sequence[str]) -> list[float | None]:
    """Per board row: the mean of its ranks on the benchmarks `members`, each ranked among every run holding it;
    None unless the row has a score on all of them (as the average score)."""
    per = [dense_ranks(column_scores(grid, bid)) for bid in members]
    out: list[float | None] = []
    for i in range(len(grid)):
        got = [r[i] for r in per]
        out.append(None if not got or any(g is None for g in got) else sum(g for g in got if g is not None) / len(got))
    return out


def rank_text(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"
