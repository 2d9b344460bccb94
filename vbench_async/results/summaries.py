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

from ..record_io import RecordError
from ..sample_result import Result
from .current import drop_stale, split_current
from .lines import BadLine
from .manifest import PlannedBenchmark, manifest
from .manifest_record import Manifest, RecordedRunConfig
from .readings import ReadingAggregate, aggregate_readings, summary_block
from .result_file import read_results
from .rundir import ShardId, manifest_path, read_manifest, read_summary, summary_path, write_json
from .streamed import streamed_aggregate
from .summary_record import BenchmarkSummary, RunStats, ShardInfo, Subset, Summary
from .verdicts import active_judge, apply_active_judge

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark
    from ..models import ModelRef

log = logging.getLogger(__name__)

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
                     block: BenchmarkSummary | Mapping[str, Any] | None = None) -> JudgedResults:
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
        stored = BenchmarkSummary.of(block)
        current, stale = drop_stale(current, stored), list(stored.stale_ids)
    elif stale:
        log.warning("%s: %d line(s) of samples no longer in the annotation file left out: %s", results_path,
                    len(stale), ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""))
    results, judge_info = apply_active_judge(run_dir, results_path, current)
    readings = aggregate_readings(benchmark, results) if benchmark is not None else None
    return JudgedResults(results, readings.block() if readings else {}, judge_info, stale, bad, readings)


def summarize_benchmark(run_dir: Path, benchmark: Benchmark, results_path: Path, config_hash: str,
                        n_expected: int, current_ids: Collection[str] | None = None,
                        interrupted: bool = False, subset: Mapping[str, Any] | None = None) -> BenchmarkSummary:
    """Aggregate of one benchmark's result file, with the counts and markers summary.json carries. Only lines of
    `current_ids` (the annotation file's samples now) count. `subset` (see `subset_of`): the run evaluated only
    part of the benchmark, so its status is "subset", never "complete"."""
    judged = streamed_aggregate(run_dir, benchmark, results_path, current_ids=current_ids)
    block = BenchmarkSummary.of(judged.block)
    block.n_expected = n_expected
    # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
    block.complete = judged.complete(n_expected, stored=not interrupted)
    if subset:
        block.subset = Subset.of(subset)
    mark_status(block)
    block.results_file = str(results_path.relative_to(run_dir))
    block.config_hash = config_hash
    return block


def benchmark_status(block: BenchmarkSummary | Mapping[str, Any]) -> str:
    """complete: every sample has a result and none failed; subset: the same for a run that evaluated only part of
    the benchmark (`--max-samples`, one shard); failed: every sample has a result and all of them are failures;
    partial: samples are missing (interrupted, or still to run) or some of them failed (the score counts them as
    wrong over every sample: `n_failed` says how many)."""
    b = BenchmarkSummary.of(block)
    if not b.complete:
        return "partial"
    if b.n_total and b.n_failed >= b.n_total:
        return "failed"
    if b.n_failed:
        return "partial"
    return "subset" if b.subset is not None and b.subset.to_json() else "complete"


def run_status(benchmarks: Mapping[str, BenchmarkSummary | Mapping[str, Any]],
               not_run: Mapping[str, str] | None = None) -> str:
    """The run's status: the worst of its benchmarks' (partial when a selected benchmark was not run at all)."""
    blocks = [BenchmarkSummary.of(b) for b in benchmarks.values()]
    statuses = {b.status or benchmark_status(b) for b in blocks}
    if not_run or "partial" in statuses or not statuses:
        return "partial"
    for status in ("failed", "subset"):
        if status in statuses:
            return status
    return "complete"


def mark_status(block: BenchmarkSummary) -> None:
    """Set a summary block's `status`; a benchmark whose samples all failed has no score, not a score of 0."""
    block.status = benchmark_status(block)
    if block.status == "failed":
        block.score = None


def subset_of(run_config: Mapping[str, Any], plan: PlannedBenchmark) -> dict[str, Any] | None:
    """What part of the benchmark a run evaluated, or None for all of it: `--max-samples` below the benchmark's
    record count, and/or one shard of a sharded run."""
    out: dict[str, Any] = {}
    recorded = RecordedRunConfig.of(run_config)
    max_samples = recorded.selection.max_samples
    if max_samples is not None:
        available = plan.benchmark.record_count(recorded.selection.data_root)
        if available is None or available > max_samples:
            out.update(max_samples=max_samples, n_available=available)
    if recorded.shard:
        out["shard"] = f"{recorded.shard[0]}/{recorded.shard[1]}"
    if not out:
        return None
    out["reason"] = _subset_reason(Subset.of(out))
    return out


def records_subset(shard_subset: Subset | None) -> dict[str, Any] | None:
    """A shard's `subset` as the merged run has it: only its `--max-samples` part (the merge covers every shard)."""
    if shard_subset is None or not shard_subset.has("max_samples"):
        return None
    out: dict[str, Any] = {"max_samples": shard_subset.max_samples, "n_available": shard_subset.n_available}
    out["reason"] = _subset_reason(Subset.of(out))
    return out


def _subset_reason(subset: Subset) -> str:
    parts = []
    if subset.has("max_samples"):
        available = subset.n_available
        parts.append(f"the first {subset.max_samples} of {available if available is not None else '?'} "
                     f"records (--max-samples {subset.max_samples})")
    if subset.has("shard"):
        parts.append(f"shard {subset.shard} of a sharded run")
    return "; ".join(parts)


def write_run_outputs(run_dir: Path, model: ModelRef, run_config: Mapping[str, Any],
                      backend_options: Mapping[str, Any], plans: Sequence[PlannedBenchmark],
                      loop_stats: dict[str, Any], started_at: float, shard: ShardId | None = None,
                      not_run: Mapping[str, str] | None = None, recheck: bool = False) -> Summary:
    """Write the run's summary and manifest (a shard's own files for a shard) and return the summary. `not_run`:
    benchmarks of the selection that were not run (their data is absent) and why: the run is then not complete.
    `recheck`: nothing was left to run; an earlier run's timings are kept (a no-op re-run records itself as a
    re-check beside them, never as a 0-second run with no throughput)."""
    stats = RunStats.of(loop_stats)
    interrupted = stats.interrupted
    benchmarks = {p.benchmark.id: summarize_benchmark(run_dir, p.benchmark, p.store.path, p.store.config_hash,
                                                      p.n_total, getattr(p, "sample_ids", None), interrupted,
                                                      subset_of(run_config, p))
                  for p in plans}
    finished_at = time.time()
    summary = Summary(
        model=model.display_name,
        family=model.family,
        # complete: every selected sample has a result; status says whether the selection was the whole benchmark
        complete=all(b.complete for b in benchmarks.values()) and not not_run,
        status=run_status(benchmarks, not_run),
        benchmarks=benchmarks,
        run=stats,
        wall_s=round(finished_at - started_at, 3),
        not_run=dict(not_run or {}),
        random_weights=bool(model.random_weights),  # the table and the site say why its scores sit near 0
        # A shard summarises its own slice only, in its own files: shards never write summary.json (merge does).
        shard=ShardInfo(index=shard[0], count=shard[1]) if shard else None,
    )
    judge = active_judge(run_dir)
    record = manifest(model, run_config, backend_options, plans, loop_stats, started_at, finished_at,
                      benchmarks=benchmarks, judge=judge.to_json() if judge else None)
    if recheck:
        _keep_earlier_timings(run_dir, shard, summary, record, finished_at)
    write_json(summary_path(run_dir, shard), summary.to_json())
    write_json(manifest_path(run_dir, shard), record)
    return summary


_TIMINGS = ("throughput", "started_at", "finished_at", "duration_s")


def _keep_earlier_timings(run_dir: Path, shard: ShardId | None, summary: Summary, record: dict[str, Any],
                          now: float) -> None:
    """A re-run that ran nothing: the earlier run's stats and timings stay, with this re-check's time beside them."""
    from .manifest import iso

    if not summary_path(run_dir, shard).exists():
        return
    try:
        earlier, earlier_manifest = read_summary(run_dir, shard), read_manifest(run_dir, shard)
    except RecordError:  # no summary and manifest to keep timings from: this run's own stand
        return
    if not earlier.complete or not earlier.run.to_json() or earlier_manifest is None:
        return
    summary.run, summary.wall_s = earlier.run, earlier.wall_s
    summary.rechecked_at = record["rechecked_at"] = [*earlier_manifest.rechecked_at, iso(now)]
    kept = earlier_manifest.to_json()
    record.update({k: kept[k] for k in _TIMINGS if k in kept})


def recorded_benchmarks(summary: Summary, recorded: Manifest | None) -> dict[str, Benchmark]:
    """The run's benchmarks as it evaluated them: each under the recipe its config in the manifest records
    (`recorded_benchmark`; UserError for a recipe this version does not hold)."""
    from ..benchmarks.registry import recorded_benchmark

    entries = recorded.benchmarks if recorded is not None else {}
    recipes = {bid: e.config.recipe for bid, e in entries.items() if e.config is not None and e.config.recipe}
    return {bid: recorded_benchmark(bid, recipes[bid].name, recipes[bid].version) if bid in recipes
            else recorded_benchmark(bid, None) for bid in summary.benchmarks}


def recompute_summary(run_dir: Path) -> Summary:
    """Re-aggregate every benchmark of summary.json from its result file with the active judge's verdicts, and
    record that judge in manifest.json. Each benchmark is taken as the run evaluated it (`recorded_benchmarks`)."""
    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    recorded = read_manifest(run_dir)
    benches = recorded_benchmarks(summary, recorded)
    for bid, old in list(summary.benchmarks.items()):
        judged = streamed_aggregate(run_dir, benches[bid], run_dir / str(old.results_file), block=old)
        block = BenchmarkSummary.of(judged.block)
        # What the block keeps of the one it replaces: set when the run was planned, not by aggregation.
        block.n_expected, block.results_file, block.config_hash = old.n_expected, old.results_file, old.config_hash
        block.subset = old.subset
        # Counted again, as the leaderboard counts: a line damaged since the run no longer passes for a result.
        block.complete = judged.complete(int(old.n_expected or 0), old.complete is not False)
        mark_status(block)
        summary.benchmarks[bid] = block
    summary.status = run_status(summary.benchmarks, summary.not_run)
    write_json(summary_path(run_dir), summary.to_json())
    if recorded is not None:
        recorded.judge = active_judge(run_dir)
        write_json(manifest_path(run_dir), recorded.to_json())
    return summary
