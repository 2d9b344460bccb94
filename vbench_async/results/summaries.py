"""summary.json and manifest.json: each benchmark's result file, with the active judge's verdicts applied, aggregated.

`judged_aggregate` is the one place a result file becomes numbers; the run's outputs, a judge pass's recomputation,
a merge and the leaderboard all go through it. Each benchmark is aggregated under both readings of its outputs
(`aggregate_readings`): the headline from the official one, the robust score and the disagreements beside it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from ..result import Result
from .current import drop_stale, split_current
from .lines import BadLine
from .manifest import PlannedBenchmark, manifest
from .readings import ReadingAggregate, aggregate_readings, summary_block
from .rundir import ShardId, manifest_path, read_json, read_manifest, read_summary, summary_path, write_json
from .store import read_results
from .streamed import streamed_aggregate
from .verdicts import active_judge, apply_active_judge

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark
    from ..models import ModelRef

log = logging.getLogger(__name__)

# What a recomputed summary keeps of the block it replaces (set when the run was planned, not by aggregation).
_PLANNED = ("n_expected", "results_file", "config_hash", "subset")


@dataclass
class JudgedResults:
    """One result file as it counts: the lines of current samples with the active judge's verdicts applied, their
    aggregate, and what was left out (lines of ids no longer in the annotation file; lines that are not results)."""

    results: list[Result]
    aggregate: dict[str, Any]  # ReadingAggregate.block(): the headline and the robust score ({} without a benchmark)
    judge: dict[str, Any] | None  # the verdict counts, None when no judge ran
    stale: list[str] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    readings: ReadingAggregate | None = None  # None when no benchmark was given

    def summary_block(self) -> dict[str, Any]:
        """The aggregate as summary.json holds it: the verdict counts under "judge" when a judge ran, and the lines
        left out (`n_stale`/`stale_ids`, `n_bad_lines`/`bad_lines`)."""
        return summary_block(self.aggregate, self.judge, self.stale, self.bad)


def judged_aggregate(run_dir: Path, benchmark: Benchmark | None, results_path: Path,
                     view: Callable[[Result], Result] | None = None,
                     current_ids: Collection[str] | None = None,
                     block: Mapping[str, Any] | None = None) -> JudgedResults:
    """Read `results_path` (each line through `view`; bad lines reported and left out), keep the current samples'
    lines, apply the active judge's verdicts, aggregate. The lines are held (the leaderboard shows them); a summary,
    which needs only the numbers, reads the file with `streamed.streamed_aggregate`, to the same numbers.

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
    readings = aggregate_readings(benchmark, results) if benchmark is not None else None
    return JudgedResults(results, readings.block() if readings else {}, judge_info, stale, bad, readings)


def summarize_benchmark(run_dir: Path, benchmark: Benchmark, results_path: Path, config_hash: str,
                        n_expected: int, current_ids: Collection[str] | None = None,
                        interrupted: bool = False, subset: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Aggregate of one benchmark's result file, with the counts and markers summary.json carries. Only lines of
    `current_ids` (the annotation file's samples now) count. `subset` (see `subset_of`): the run evaluated only
    part of the benchmark, so its status is "subset", never "complete"."""
    judged = streamed_aggregate(run_dir, benchmark, results_path, current_ids=current_ids)
    agg = judged.block
    agg["n_expected"] = n_expected
    # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
    agg["complete"] = judged.complete(n_expected, stored=not interrupted)
    if subset:
        agg["subset"] = dict(subset)
    mark_status(agg)
    agg["results_file"] = str(results_path.relative_to(run_dir))
    agg["config_hash"] = config_hash
    return agg


def benchmark_status(agg: Mapping[str, Any]) -> str:
    """complete: every sample has a result and none failed; subset: the same for a run that evaluated only part of
    the benchmark (`--max-samples`, one shard); failed: every sample has a result and all of them are failures;
    partial: samples are missing (interrupted, or still to run) or some of them failed (the score counts them as
    wrong over every sample: `n_failed` says how many)."""
    if not agg.get("complete"):
        return "partial"
    n, failed = agg.get("n_total", 0), agg.get("n_failed", 0)
    if n and failed >= n:
        return "failed"
    if failed:
        return "partial"
    return "subset" if agg.get("subset") else "complete"


def run_status(benchmarks: Mapping[str, Mapping[str, Any]], not_run: Mapping[str, str] | None = None) -> str:
    """The run's status: the worst of its benchmarks' (partial when a selected benchmark was not run at all)."""
    statuses = {b.get("status") or benchmark_status(b) for b in benchmarks.values()}
    if not_run or "partial" in statuses or not statuses:
        return "partial"
    for status in ("failed", "subset"):
        if status in statuses:
            return status
    return "complete"


def mark_status(agg: dict[str, Any]) -> None:
    """Set a summary block's `status`; a benchmark whose samples all failed has no score, not a score of 0."""
    agg["status"] = benchmark_status(agg)
    if agg["status"] == "failed":
        agg["score"] = None


def subset_of(run_config: Mapping[str, Any], plan: PlannedBenchmark) -> dict[str, Any] | None:
    """What part of the benchmark a run evaluated, or None for all of it: `--max-samples` below the benchmark's
    record count, and/or one shard of a sharded run."""
    out: dict[str, Any] = {}
    selection = run_config.get("selection") or {}
    max_samples = selection.get("max_samples")
    if max_samples is not None:
        available = plan.benchmark.record_count(selection.get("data_root"))
        if available is None or available > max_samples:
            out.update(max_samples=max_samples, n_available=available)
    shard = run_config.get("shard")
    if shard:
        out["shard"] = f"{shard[0]}/{shard[1]}"
    if not out:
        return None
    out["reason"] = _subset_reason(out)
    return out


def records_subset(shard_subset: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A shard's `subset` as the merged run has it: only its `--max-samples` part (the merge covers every shard)."""
    if not shard_subset or "max_samples" not in shard_subset:
        return None
    out = {"max_samples": shard_subset["max_samples"], "n_available": shard_subset.get("n_available")}
    out["reason"] = _subset_reason(out)
    return out


def _subset_reason(subset: Mapping[str, Any]) -> str:
    parts = []
    if "max_samples" in subset:
        available = subset.get("n_available")
        parts.append(f"the first {subset['max_samples']} of {available if available is not None else '?'} "
                     f"records (--max-samples {subset['max_samples']})")
    if "shard" in subset:
        parts.append(f"shard {subset['shard']} of a sharded run")
    return "; ".join(parts)


def write_run_outputs(run_dir: Path, model: ModelRef, run_config: Mapping[str, Any],
                      backend_options: Mapping[str, Any], plans: Sequence[PlannedBenchmark],
                      loop_stats: dict[str, Any], started_at: float, shard: ShardId | None = None,
                      not_run: Mapping[str, str] | None = None, recheck: bool = False) -> dict[str, Any]:
    """Write the run's summary and manifest (a shard's own files for a shard) and return the summary. `not_run`:
    benchmarks of the selection that were not run (their data is absent) and why: the run is then not complete.
    `recheck`: nothing was left to run; an earlier run's timings are kept (a no-op re-run records itself as a
    re-check beside them, never as a 0-second run with no throughput)."""
    interrupted = bool(loop_stats.get("interrupted"))
    benchmarks = {p.benchmark.id: summarize_benchmark(run_dir, p.benchmark, p.store.path, p.store.config_hash,
                                                      p.n_total, getattr(p, "sample_ids", None), interrupted,
                                                      subset_of(run_config, p))
                  for p in plans}
    finished_at = time.time()
    summary = {
        "model": model.display_name,
        "family": model.family,
        # complete: every selected sample has a result; status says whether the selection was the whole benchmark
        "complete": all(b["complete"] for b in benchmarks.values()) and not not_run,
        "status": run_status(benchmarks, not_run),
        "benchmarks": benchmarks,
        "run": loop_stats,
        "wall_s": round(finished_at - started_at, 3),
    }
    if not_run:
        summary["not_run"] = dict(not_run)
    if model.random_weights:
        summary["random_weights"] = True  # the table and the site say why its scores sit near 0
    if shard:
        # A shard summarises its own slice only, in its own files: shards never write summary.json (merge does).
        summary["shard"] = {"index": shard[0], "count": shard[1]}
    record = manifest(model, run_config, backend_options, plans, loop_stats, started_at, finished_at,
                      benchmarks=benchmarks, judge=active_judge(run_dir))
    if recheck:
        _keep_earlier_timings(run_dir, shard, summary, record, finished_at)
    write_json(summary_path(run_dir, shard), summary)
    write_json(manifest_path(run_dir, shard), record)
    return summary


_TIMINGS = ("throughput", "started_at", "finished_at", "duration_s")


def _keep_earlier_timings(run_dir: Path, shard: ShardId | None, summary: dict[str, Any], record: dict[str, Any],
                          now: float) -> None:
    """A re-run that ran nothing: the earlier run's stats and timings stay, with this re-check's time beside them."""
    from .manifest import iso

    earlier = read_json(summary_path(run_dir, shard))
    earlier_manifest = read_json(manifest_path(run_dir, shard))
    if not isinstance(earlier, dict) or not earlier.get("complete") or not earlier.get("run") or \
            not isinstance(earlier_manifest, dict):
        return
    summary["run"], summary["wall_s"] = earlier["run"], earlier.get("wall_s")
    rechecks = [*(earlier_manifest.get("rechecked_at") or []), iso(now)]
    summary["rechecked_at"] = record["rechecked_at"] = rechecks
    record.update({k: earlier_manifest[k] for k in _TIMINGS if k in earlier_manifest})


def recompute_summary(run_dir: Path) -> dict[str, Any]:
    """Re-aggregate every benchmark of summary.json from its result file with the active judge's verdicts, and
    record that judge in manifest.json."""
    from ..benchmarks import get_benchmark

    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    for bid, old in list(summary["benchmarks"].items()):
        judged = streamed_aggregate(run_dir, get_benchmark(bid), run_dir / old["results_file"], block=old)
        agg = judged.block
        agg.update({k: old[k] for k in _PLANNED if k in old})
        # Counted again, as the leaderboard counts: a line damaged since the run no longer passes for a result.
        agg["complete"] = judged.complete(int(old.get("n_expected") or 0), old.get("complete") is not False)
        mark_status(agg)
        summary["benchmarks"][bid] = agg
    summary["status"] = run_status(summary["benchmarks"], summary.get("not_run"))
    write_json(summary_path(run_dir), summary)
    recorded = read_manifest(run_dir)
    if recorded is not None:
        recorded["judge"] = active_judge(run_dir)
        write_json(manifest_path(run_dir), recorded)
    return summary
