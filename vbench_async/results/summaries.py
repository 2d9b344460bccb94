"""summary.json and manifest.json: each benchmark's result file, with the active judge's verdicts applied, aggregated.

`judged_aggregate` is the one place a result file becomes numbers; the run's outputs, a judge pass's recomputation,
a merge and the leaderboard all go through it.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from .current import drop_stale, is_complete, split_current
from .lines import BadLine, mark_bad_lines
from .manifest import PlannedBenchmark, manifest
from .rundir import ShardId, manifest_path, read_manifest, read_summary, summary_path, write_json
from .store import read_results
from .verdicts import active_judge, apply_active_judge, needs_judge

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark
    from ..models import ModelRef

log = logging.getLogger(__name__)

# What aggregation reads of a result line (answer and extracted: the spatio-temporal metrics re-parse them).
_AGGREGATED = ("sample_id", "task_type", "score", "error", "fields", "details", "answer", "extracted", "official",
               "robust")
# What a recomputed summary keeps of the block it replaces (set when the run was planned, not by aggregation).
_PLANNED = ("n_expected", "results_file", "config_hash")


def aggregate_view(result: dict[str, Any]) -> dict[str, Any]:
    """A result line reduced to what aggregation needs: prompts and outputs stay on disk, so summarising a large run
    holds a few hundred bytes per sample. Lines awaiting an LLM judge stay whole (its answer hash reads the output)."""
    if needs_judge(result):
        return result
    view = {k: result[k] for k in _AGGREGATED if k in result}
    if isinstance(view.get("fields"), dict):
        view["fields"] = {sys.intern(k): v for k, v in view["fields"].items()}
    return view


@dataclass
class JudgedResults:
    """One result file as it counts: the lines of current samples with the active judge's verdicts applied, their
    aggregate, and what was left out (lines of ids no longer in the annotation file; lines that are not results)."""

    results: list[dict[str, Any]]
    aggregate: dict[str, Any]  # the benchmark's official aggregation ({} when no benchmark was given)
    judge: dict[str, Any] | None  # the verdict counts, None when no judge ran
    stale: list[str] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)

    def summary_block(self) -> dict[str, Any]:
        """The aggregate as summary.json holds it: the verdict counts under "judge" when a judge ran, and the lines
        left out (`n_stale`/`stale_ids`, `n_bad_lines`/`bad_lines`)."""
        block = {**self.aggregate, "judge": self.judge} if self.judge else dict(self.aggregate)
        if self.stale:
            block["n_stale"], block["stale_ids"] = len(self.stale), self.stale
        mark_bad_lines(block, self.bad)
        return block


def judged_aggregate(run_dir: Path, benchmark: Benchmark | None, results_path: Path,
                     view: Callable[[dict[str, Any]], dict[str, Any]] | None = aggregate_view,
                     current_ids: Collection[str] | None = None,
                     block: Mapping[str, Any] | None = None) -> JudgedResults:
    """Read `results_path` (each line through `view`; bad lines reported and left out), keep the current samples'
    lines, apply the active judge's verdicts, aggregate.

    The current samples are `current_ids` (a run that knows its annotation file) or, for a stored run, every id but
    the stale ones its summary `block` lists."""
    bad: list[BadLine] = []
    lines = read_results(results_path, view=view, problems=bad)
    current, stale = split_current(lines.values(), current_ids)
    del lines
    if block is not None:
        current, stale = drop_stale(current, block), list(block.get("stale_ids") or ())
    elif stale:
        log.warning("%s: %d line(s) of samples no longer in the annotation file left out: %s", results_path,
                    len(stale), ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""))
    results, judge_info = apply_active_judge(run_dir, results_path, current)
    aggregate = benchmark.aggregate(results) if benchmark is not None else {}
    return JudgedResults(results, aggregate, judge_info, stale, bad)


def summarize_benchmark(run_dir: Path, benchmark: Benchmark, results_path: Path, config_hash: str,
                        n_expected: int, current_ids: Collection[str] | None = None,
                        interrupted: bool = False) -> dict[str, Any]:
    """Aggregate of one benchmark's result file, with the counts and markers summary.json carries. Only lines of
    `current_ids` (the annotation file's samples now) count."""
    judged = judged_aggregate(run_dir, benchmark, results_path, current_ids=current_ids)
    agg = judged.summary_block()
    agg["n_expected"] = n_expected
    # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
    agg["complete"] = is_complete(judged.results, n_expected, stored=not interrupted)
    mark_status(agg)
    agg["results_file"] = str(results_path.relative_to(run_dir))
    agg["config_hash"] = config_hash
    return agg


def benchmark_status(agg: Mapping[str, Any]) -> str:
    """complete: every sample has a result and some were answered; failed: every sample has a result and all of them
    are failures; partial: samples are missing (interrupted, or still to run)."""
    if not agg.get("complete"):
        return "partial"
    n = agg.get("n_total", 0)
    return "failed" if n and agg.get("n_failed", 0) >= n else "complete"


def mark_status(agg: dict[str, Any]) -> None:
    """Set a summary block's `status`; a benchmark whose samples all failed has no score, not a score of 0."""
    agg["status"] = benchmark_status(agg)
    if agg["status"] == "failed":
        agg["score"] = None


def write_run_outputs(run_dir: Path, model: ModelRef, run_config: Mapping[str, Any],
                      backend_options: Mapping[str, Any], plans: Sequence[PlannedBenchmark],
                      loop_stats: dict[str, Any], started_at: float, shard: ShardId | None = None,
                      not_run: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write the run's summary and manifest (a shard's own files for a shard) and return the summary. `not_run`:
    benchmarks of the selection that were not run (their data is absent) and why: the run is then not complete."""
    interrupted = bool(loop_stats.get("interrupted"))
    benchmarks = {p.benchmark.id: summarize_benchmark(run_dir, p.benchmark, p.store.path, p.store.config_hash,
                                                      p.n_total, getattr(p, "sample_ids", None), interrupted)
                  for p in plans}
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
    if shard:
        # A shard summarises its own slice only, in its own files: shards never write summary.json (merge does).
        summary["shard"] = {"index": shard[0], "count": shard[1]}
    write_json(summary_path(run_dir, shard), summary)
    write_json(manifest_path(run_dir, shard),
               manifest(model, run_config, backend_options, plans, loop_stats, started_at, finished_at,
                        benchmarks=benchmarks, judge=active_judge(run_dir)))
    return summary


def recompute_summary(run_dir: Path) -> dict[str, Any]:
    """Re-aggregate every benchmark of summary.json from its result file with the active judge's verdicts, and
    record that judge in manifest.json."""
    from ..benchmarks import get_benchmark

    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    for bid, old in list(summary["benchmarks"].items()):
        judged = judged_aggregate(run_dir, get_benchmark(bid), run_dir / old["results_file"], block=old)
        agg = judged.summary_block()
        agg.update({k: old[k] for k in _PLANNED if k in old})
        # Counted again, as the leaderboard counts: a line damaged since the run no longer passes for a result.
        agg["complete"] = is_complete(judged.results, int(old.get("n_expected") or 0), old.get("complete") is not False)
        mark_status(agg)
        summary["benchmarks"][bid] = agg
    write_json(summary_path(run_dir), summary)
    recorded = read_manifest(run_dir)
    if recorded is not None:
        recorded["judge"] = active_judge(run_dir)
        write_json(manifest_path(run_dir), recorded)
    return summary
