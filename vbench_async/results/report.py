"""After a run: aggregate each benchmark's result file, write summary.json and manifest.json, print the table."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from .manifest import manifest

SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"


def write_run_outputs(run_dir: Path, model: Any, cfg: Any, plans: list, loop_stats: dict, started_at: float,
                      write_site: bool = True, not_run: dict[str, str] | None = None) -> dict[str, Any]:
    """`not_run`: benchmarks of the selection that were not run (their data is absent) and why: the run is then not
    complete, and the summary and table list them."""
    from ..judge import active_judge

    benchmarks = {p.benchmark.id: summarize_benchmark(run_dir, p.benchmark, p.store.path, p.store.config_hash,
                                                      p.n_total) for p in plans}
    finished_at = time.time()
    summary = {
        "model": model.display_name,
        "family": model.family,
        "complete": all(b["complete"] for b in benchmarks.values()) and not not_run,
        "benchmarks": benchmarks,
        "run": loop_stats,
        "wall_s": round(finished_at - started_at, 3),
    }
    if not_run:
        summary["not_run"] = dict(not_run)
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
                        n_expected: int) -> dict[str, Any]:
    """Aggregate of one benchmark's result file, with the counts and markers summary.json carries."""
    from ..judge import apply_active_judge
    from .store import read_results

    # Verdicts of an LLM judge pass (if one ran) replace the offline scores of open-ended items.
    lines = read_results(results_path, view=aggregate_view)
    results, judge_info = apply_active_judge(run_dir, results_path, list(lines.values()))
    del lines
    agg = benchmark.aggregate(results)
    if judge_info:
        agg["judge"] = judge_info
    agg["n_expected"] = n_expected
    # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
    agg["complete"] = len(results) >= n_expected
    agg["status"] = benchmark_status(agg)
    if agg["status"] == "failed":
        agg["score"] = None  # no sample was answered: there is no score, not a score of 0
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


def benchmark_status(agg: dict[str, Any]) -> str:
    """complete: every sample has a result and some were answered; failed: every sample has a result and all of them
    are failures; partial: samples are missing (interrupted, or still to run)."""
    if not agg.get("complete"):
        return "partial"
    n = agg.get("n_total", 0)
    return "failed" if n and agg.get("n_failed", 0) >= n else "complete"


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
        status = b.get("status") or benchmark_status(b)
        rows.append((
            bid,
            f"{100 * score:.2f}" if isinstance(score, (int, float)) and status != "failed" else "-",
            str(b.get("n_total", 0)),
            str(b.get("n_failed", 0)),
            {"complete": "complete", "failed": "ALL FAILED"}.get(status, "PARTIAL"),
        ))
    for bid in summary.get("not_run") or {}:
        rows.append((bid, "-", "0", "0", "NOT RUN (no data)"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))), file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # unique: writers may race
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)

