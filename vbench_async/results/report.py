"""After a run: aggregate each benchmark's result file, write summary.json and manifest.json, print the table."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Collection

from .manifest import manifest

log = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"


def write_run_outputs(run_dir: Path, model: Any, cfg: Any, plans: list, loop_stats: dict, started_at: float,
                      write_site: bool = True) -> dict[str, Any]:
    from ..judge import active_judge

    interrupted = bool(loop_stats.get("interrupted"))
    benchmarks = {p.benchmark.id: summarize_benchmark(run_dir, p.benchmark, p.store.path, p.store.config_hash,
                                                      p.n_total, getattr(p, "sample_ids", None), interrupted)
                  for p in plans}
    finished_at = time.time()
    summary = {
        "model": model.display_name,
        "family": model.family,
        "complete": all(b["complete"] for b in benchmarks.values()),
        "benchmarks": benchmarks,
        "run": loop_stats,
        "wall_s": round(finished_at - started_at, 3),
    }
    shard = getattr(cfg, "shard", None)
    if shard:
        # A shard summarises its own slice only, in its own files: shards never write summary.json (merge does).
        summary["shard"] = {"index": shard[0], "count": shard[1]}
        write_site = False
    _write_json(run_dir / output_name(SUMMARY_FILE, shard), summary)
    _write_json(run_dir / output_name(MANIFEST_FILE, shard),
                manifest(model, cfg, plans, loop_stats, started_at, finished_at, benchmarks=benchmarks,
                         judge=active_judge(run_dir)))
    if write_site:
        from ..leaderboard import build_site

        site = build_site([run_dir], run_dir / "leaderboard")
        summary["leaderboard"] = str(site / "index.html")
    return summary


def summarize_benchmark(run_dir: Path, benchmark: Any, results_path: Path, config_hash: str,
                        n_expected: int, current_ids: Collection[str] | None = None,
                        interrupted: bool = False) -> dict[str, Any]:
    """Aggregate of one benchmark's result file, with the counts and markers summary.json carries. Only lines of
    `current_ids` (the annotation file's samples now) count; the others are listed as stale."""
    from ..judge import apply_active_judge
    from .current import is_complete, split_current
    from .lines import mark_bad_lines
    from .store import read_results

    bad: list = []
    lines = read_results(results_path, view=aggregate_view, problems=bad)
    current, stale = split_current(lines.values(), current_ids)
    del lines
    # Verdicts of an LLM judge pass (if one ran) replace the offline scores of open-ended items.
    results, judge_info = apply_active_judge(run_dir, results_path, current)
    agg = benchmark.aggregate(results)
    if judge_info:
        agg["judge"] = judge_info
    agg["n_expected"] = n_expected
    if stale:
        log.warning("%s: %d line(s) of samples no longer in the annotation file left out: %s", results_path,
                    len(stale), ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""))
        agg["n_stale"], agg["stale_ids"] = len(stale), stale
    mark_bad_lines(agg, bad)
    # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
    agg["complete"] = is_complete(results, n_expected, stored=not interrupted)
    agg["results_file"] = str(results_path.relative_to(run_dir))
    agg["config_hash"] = config_hash
    return agg


# What aggregation reads of a result line (answer and extracted: the spatio-temporal metrics re-parse them).
_AGGREGATED = ("sample_id", "task_type", "score", "error", "fields", "details", "answer", "extracted")


def aggregate_view(result: dict[str, Any]) -> dict[str, Any]:
    """A result line reduced to what aggregation needs: prompts and outputs stay on disk, so summarising a large run
    holds a few hundred bytes per sample. Lines awaiting an LLM judge stay whole (its answer hash reads the output)."""
    from ..judge import needs_judge

    if needs_judge(result):
        return result
    view = {k: result[k] for k in _AGGREGATED if k in result}
    if isinstance(view.get("fields"), dict):
        view["fields"] = {sys.intern(k): v for k, v in view["fields"].items()}
    return view


def output_name(name: str, shard: tuple[int, int] | None) -> str:
    """summary.json -> summary.shard-0-of-4.json for a shard."""
    if not shard:
        return name
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.shard-{shard[0]}-of-{shard[1]}.{suffix}"


def print_table(summary: dict[str, Any], file=sys.stdout) -> None:
    rows = [("benchmark", "score", "n_total", "failed", "status")]
    for bid, b in summary["benchmarks"].items():
        score = b.get("score")
        rows.append((
            bid,
            f"{100 * score:.2f}" if isinstance(score, (int, float)) else "-",
            str(b.get("n_total", 0)),
            str(b.get("n_failed", 0)),
            "complete" if b.get("complete") else "PARTIAL",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))), file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # unique: writers may race
    try:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written temporary file behind

