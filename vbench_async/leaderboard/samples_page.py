"""The rows of a sample browser: each result line with its frame strip, its categories and its two readings.

Also the two headline readings of a run's benchmark (`reading_scores`): the benchmark's aggregation over the
official readings and over the robust ones, and how many samples the two graders disagree on.
"""

from __future__ import annotations

from typing import Any

from ..sample_result import Result
from .board import truth_text
from .thumbnails import Thumbnailer

# What a sample row carries to the page (the page draws it; see static/site.js).
_KEEP = ("run", "sample_id", "task_type", "question", "options", "answer", "output", "extracted", "score",
         "judge_verdict", "error_kind", "error", "prompt")


def sample_rows(records: list[dict[str, Any]], results: list[Result], card: Any,
                thumbs: Thumbnailer | None) -> list[dict[str, Any]]:
    """`records`: rows of tables.samples_table (every column present); `results`: the lines they came from, in the
    same order (their frame records name the video file to fall back on). `card`: the benchmark's card (None for an
    unknown benchmark)."""
    out = []
    for row, line in zip(records, results, strict=True):
        strip = thumbs.strip(line.frames) if thumbs is not None else None
        out.append({**{k: row[k] for k in _KEEP}, "official": row["official_score"],
                    "robust": row["robust_score"], "truth": truth_text(row["answer"]),
                    "categories": categories_of(row, card),
                    "frames": strip.to_dict() if strip is not None else None})
    return out


def categories_of(row: dict[str, Any], card: Any) -> list[str]:
    """The row's groups as "breakdown: group" labels (task type first), as the category filter lists them."""
    from ..benchmarks.aggregate import category_value

    out = [f"task type: {row['task_type']}"] if row["task_type"] else []
    for cat in getattr(card, "categories", ()) or ():
        group = category_value(cat, row["fields"] or {})
        if group is not None:
            out.append(f"{cat.name}: {group}")
    return out


def category_options(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({c for r in rows for c in r["categories"]})


def reading_scores(bench: Any) -> dict[str, Any]:
    """A run's benchmark as the pages show its two readings (a `load.BenchRun`; the numbers are the summary's, from
    `results.summaries`): the official headline, the robust score, how many answered samples carry both readings
    and on how many they differ."""
    both = sum(1 for r in bench.results if not r.failed and r.reading("official") is not None
               and r.reading("robust") is not None)
    return {"official": bench.score, "robust": bench.robust_score, "n_differ": len(bench.differing_ids),
            "n_both": both}
