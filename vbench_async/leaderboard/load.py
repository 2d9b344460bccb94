"""Read result directories into what the site shows: per run and benchmark, the (judged) result lines, the official
aggregate recomputed from them (the headline, from the official reading), the robust score and the samples the two
readings disagree on, the headline CI, and markers for anything that must not pass for a clean number.

Markers: `partial` (fewer results than expected), `subset` (the run evaluated only part of the benchmark:
`--max-samples` or one shard), `failed` (samples that errored), `needs judge` (open-ended items still on their offline
score), `config` (the benchmark was run with frames / prompt / sampling settings that change a score differently in
different runs: each variant gets a letter, so cells are never compared silently; `config_groups`), `no manifest`.

Every cell also carries the evaluation recipe it was run under (`recipe_label`: "qwen3-vl v1", or `CARDS` for a run
of the cards' own settings), and the recipe is part of the compared config: two recipes are never one configuration.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..record_io import RecordError
from ..results.current import is_complete
from ..results.manifest_record import Manifest
from ..results.readings import ReadingEstimates, differing_ids, reading_lines
from ..results.result_config import ResultConfig
from ..results.rundir import read_manifest, read_summary, safe_name
from ..results.stats import Estimate, category_estimates, headline_estimate
from ..results.summaries import benchmark_status, judged_aggregate
from ..results.summary_record import BenchmarkSummary, Subset, Summary
from ..sample_result import Result
from .config_groups import family_frame_defaults, mark_config_groups, settings

__all__ = ["CARDS", "BenchRun", "Run", "benchmark_ids", "load_run", "load_runs", "recipe_label", "settings"]

log = logging.getLogger(__name__)

CARDS = "cards"  # the recipe label of a run without --recipe: each benchmark card's own settings


def recipe_label(manifest: Manifest | None) -> str | None:
    """The evaluation recipe a run's numbers came from: its label ("qwen3-vl v1"), CARDS without one, None when
    the run has no manifest to say."""
    if manifest is None:
        return None
    return manifest.recipe.label if manifest.recipe is not None else CARDS


@dataclass
class BenchRun:
    """One benchmark of one run. `results` are the result lines whole (as the sample pages show them); `scored` the
    same lines as the headline reads them (`score` = the official reading's value, `Result.seen_as`)."""

    benchmark: str
    results: list[Result]
    aggregate: BenchmarkSummary  # recomputed from the lines (the stored block's numbers for an unknown benchmark)
    estimate: Estimate | None  # CI of the headline score (None where the metric is not a mean of sample scores)
    categories: dict[str, dict[str, Estimate]]
    n_expected: int
    config: ResultConfig | None  # its result config, as the manifest records it (None without a manifest)
    judge: dict[str, Any] | None = None
    config_group: str | None = None  # "A", "B", ... when runs disagree on the config
    config_note: str = ""  # the settings that differ between the variants, with this run's values
    problem: str | None = None  # what is wrong with the stored run (no result file, unknown benchmark)
    stored_complete: bool = True  # False when the run that wrote the summary was interrupted
    n_bad_lines: int = 0  # lines of the result file left out as invalid
    scored: list[Result] = field(default_factory=list)
    robust_estimate: Estimate | None = None
    subset: Subset | None = None  # summaries.subset_of: what part of the benchmark the run evaluated
    frame_defaults: dict[str, Any] | None = None  # the frames its model family gets by default (config_groups)
    recipe: str | None = None  # `recipe_label` of its run

    @property
    def score(self) -> float | None:
        return _finite(self.aggregate.score)

    @property
    def robust_score(self) -> float | None:
        """The careful grader's score beside the headline (None for lines written before the two readings)."""
        return _finite(self.aggregate.robust.score if self.aggregate.robust is not None else None)

    @property
    def differing_ids(self) -> list[str]:
        """Sample ids whose official and robust readings score differently (`readings.differing_ids`)."""
        return differing_ids(self.results)

    @property
    def complete(self) -> bool:
        """Every expected sample has a result (a subset run can be complete in this sense; see `status`)."""
        return is_complete(self.results, self.n_expected, self.stored_complete)

    @property
    def status(self) -> str:
        """As summary.json says it: complete, subset, partial or failed (recounted from the lines)."""
        return benchmark_status(BenchmarkSummary(complete=self.complete, n_total=len(self.results),
                                                 subset=self.subset, n_failed=self.aggregate.n_failed))

    @property
    def markers(self) -> list[str]:
        out = [self.problem] if self.problem else []
        if not self.complete:
            out.append(f"partial {len(self.results)}/{self.n_expected}")
        if self.subset:
            out.append(f"subset: {self.subset.reason or 'part of the benchmark'}")
        if self.aggregate.n_failed:
            out.append(f"{self.aggregate.n_failed} failed")
        if self.n_bad_lines:
            out.append(f"{self.n_bad_lines} invalid lines left out")
        if self.aggregate.n_needs_judge:
            out.append(f"{self.aggregate.n_needs_judge} need judge")
        if self.config_group:
            out.append(f"config {self.config_group}" + (f": {self.config_note}" if self.config_note else ""))
        return out


@dataclass
class Run:
    id: str  # unique, file-name safe
    label: str
    model: str
    dir: Path
    summary: Summary
    manifest: Manifest | None
    benchmarks: dict[str, BenchRun] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(b.complete for b in self.benchmarks.values())

    @property
    def recipe(self) -> str | None:
        return recipe_label(self.manifest)

    @property
    def subset(self) -> bool:
        return any(b.subset for b in self.benchmarks.values())

    @property
    def markers(self) -> list[str]:
        out = [] if self.complete else ["partial"]
        if self.subset:
            out.append("subset")
        failed = sum(int(b.aggregate.n_failed or 0) for b in self.benchmarks.values())
        if failed:
            out.append(f"{failed} failed")
        if self.manifest is None:
            out.append("no manifest")
        return out


def load_runs(run_dirs: list[Path], strict: bool = False) -> list[Run]:
    """Every run directory (in the order given), with judged results and recomputed aggregates. A run whose
    summary.json cannot be read or has the wrong shape is left out with a warning naming it (the others are still
    shown; UserError when none is left), or with `strict` (compare) a UserError naming it."""
    runs: list[Run] = []
    used: set[str] = set()
    left_out: list[str] = []
    for d in run_dirs:
        try:
            run = load_run(Path(d))
        except UserError as exc:  # summary.json unreadable or of the wrong shape (record_io.RecordError)
            why = str(exc)
            if strict:
                raise UserError(f"cannot read the run {d}: {why}") from None
            log.warning("left out of the leaderboard: %s", why)
            left_out.append(why)
            continue
        base, i = run.id, 2
        while run.id in used:  # two folders with the same name (runs/a/x, runs/b/x)
            run.id, i = f"{base}-{i}", i + 1
        used.add(run.id)
        runs.append(run)
    if not runs and left_out:
        raise UserError("no run could be read: " + "; ".join(left_out))
    label_counts: dict[str, int] = {}
    for r in runs:
        label_counts[r.model] = label_counts.get(r.model, 0) + 1
    for r in runs:  # the same model twice (checkpoints, settings): say which folder
        r.label = r.model if label_counts[r.model] == 1 else f"{r.model} ({r.dir.name})"
    for bid in benchmark_ids(runs):
        mark_config_groups([r.benchmarks[bid] for r in runs if bid in r.benchmarks])
    return runs


def load_run(run_dir: Path) -> Run:
    summary = read_summary(run_dir)
    manifest = _checked_manifest(run_dir)
    model = str(summary.model or run_dir.name)
    run = Run(id=safe_name(run_dir.resolve().name or "run"), label=model, model=model, dir=run_dir,
              summary=summary, manifest=manifest)
    for bid, block in summary.benchmarks.items():
        run.benchmarks[bid] = _load_benchmark(run_dir, bid, block, manifest)
    return run


def _checked_manifest(run_dir: Path) -> Manifest | None:
    """The run's manifest when it can be read as one; else None (the run is shown as one without a manifest) and a
    warning naming the file and the problem."""
    try:
        return read_manifest(run_dir)
    except RecordError as exc:
        log.warning("%s; the run is shown without its manifest", exc)
        return None


def _load_benchmark(run_dir: Path, bid: str, block: BenchmarkSummary, manifest: Manifest | None) -> BenchRun:
    from ..benchmarks import get_benchmark

    problem = None
    path = run_dir / str(block.results_file or "")
    if not block.results_file or not path.is_file():
        problem = "no result file"  # shown as a run without results (partial 0/n), never as a score
        path = run_dir / ".no-result-file"  # read as an empty result file
    try:
        benchmark = get_benchmark(bid)
    except UserError:
        benchmark = None
    card = benchmark.card if benchmark is not None else None
    # The site shows every line whole (prompts and outputs on the sample pages): no aggregation view.
    judged = judged_aggregate(run_dir, benchmark, path, view=None, block=block)
    results, judge = judged.results, judged.judge
    agg = BenchmarkSummary.of(judged.aggregate)
    estimates = judged.readings.estimates if judged.readings else ReadingEstimates()
    if card is None:  # a benchmark this version does not know: show the stored numbers, CI of the plain mean
        stored = {k: v for k, v in block.to_json().items() if k not in ("results_file", "config_hash")}
        agg = BenchmarkSummary.of(stored)
        problem = problem or "unknown benchmark: stored score"
        estimates = ReadingEstimates(official=headline_estimate(results, None))
    scored = reading_lines(results, "official")
    n_expected = int(block.n_expected or block.n_total or len(results))
    config, family = None, None
    recipe = recipe_label(manifest)
    if manifest is not None:
        family = manifest.model.family
        entry = manifest.benchmarks.get(bid)
        if entry is not None:
            config = entry.config
    return BenchRun(
        benchmark=bid, results=results, aggregate=agg, estimate=estimates.official,
        categories=category_estimates(scored, card.categories if card else ()),
        n_expected=n_expected, config=config, judge=judge, problem=problem,
        stored_complete=block.complete is not False, n_bad_lines=len(judged.bad),
        scored=scored, robust_estimate=estimates.robust,
        subset=block.subset if block.subset is not None and block.subset.to_json() else None,
        frame_defaults=family_frame_defaults(bid, family) if config else None, recipe=recipe,
    )


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def benchmark_ids(runs: list[Run]) -> list[str]:
    """Benchmarks in first-seen order (a suite's order, as the runs list them)."""
    return list(dict.fromkeys(b for r in runs for b in r.benchmarks))
