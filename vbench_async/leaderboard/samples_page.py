"""The rows of a sample browser: each result line with its frame strip, its categories and its two readings.

Also the two headline readings of a run's benchmark (`reading_scores`): the benchmark's aggregation over the
official readings and over the robust ones, and how many samples the two graders disagree on.
"""

from __future__ import annotations

from typing import Any

from . import tables
from .thumbnails import Thumbnailer

# What a sample row carries to the page (the page draws it; see static/site.js).
_KEEP = ("run", "sample_id", "task_type", "question", "options", "answer", "output", "extracted", "score",
         "judge_verdict", "error_kind", "error", "prompt", "official", "robust")


def sample_rows(records: list[dict[str, Any]], results: list[dict[str, Any]], card: Any,
                thumbs: Thumbnailer | None) -> list[dict[str, Any]]:
    """`records`: rows of tables.samples_table; `results`: the lines they came from, in the same order (their frame
    records name the video file to fall back on). `card`: the benchmark's card (None for an unknown benchmark)."""
    out = []
    for row, line in zip(records, results, strict=True):
        strip = thumbs.strip(line.get("frames")) if thumbs is not None else None
        out.append({**{k: row.get(k) for k in _KEEP}, "categories": categories_of(row, card),
                    "frames": strip.to_dict() if strip is not None else None})
    return out


def categories_of(row: dict[str, Any], card: Any) -> list[str]:
    """The row's groups as "breakdown: group" labels (task type first), as the category filter lists them."""
    from ..benchmarks.aggregate import _category_key

    out = [f"task type: {row['task_type']}"] if row.get("task_type") else []
    for cat in getattr(card, "categories", ()) or ():
        group = _category_key(cat)({"fields": row.get("fields") or {}})
        if group is not None:
            out.append(f"{cat.name}: {group}")
    return out


def category_options(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({c for r in rows for c in r["categories"]})


def reading_scores(results: list[dict[str, Any]], card: Any) -> dict[str, Any]:
    """{"official", "robust"}: the benchmark's headline aggregation with each sample scored by that reading (None
    where no line carries it); "n_differ": answered samples the two readings score differently."""
    from ..benchmarks.aggregate import aggregate

    out: dict[str, Any] = {"official": None, "robust": None, "n_differ": 0, "n_both": 0}
    for name in ("official", "robust"):
        if card is None or all(tables.reading_value(r.get(name)) is None for r in results):
            continue  # no line carries this reading (protocol "none", or lines from before readings existed)
        scored = [{**r, "score": _reading_or_score(r, name)} for r in results]
        out[name] = aggregate(scored, card.aggregation, (), card.metric if hasattr(card, "metric") else "").get("score")
    for r in results:
        o, b = tables.reading_value(r.get("official")), tables.reading_value(r.get("robust"))
        if not r.get("error") and o is not None and b is not None:
            out["n_both"] += 1
            out["n_differ"] += o != b
    return out


def _reading_or_score(r: dict[str, Any], name: str) -> Any:
    v = tables.reading_value(r.get(name))
    return v if v is not None else r.get("score")
