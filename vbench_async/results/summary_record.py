"""summary.json as declared records: the run's status and each benchmark's block (headline score, both readings,
interval, chance, counts, what was left out, what part of the benchmark ran). Read with `read_summary_file`; built
and written with `Summary(...).to_json()`. How they are read and written: `record_io.py`.

A benchmark block's aggregation-specific numbers (`by_<field>` breakdowns, `mIoU`, `R@0.5`, `official`, ...) are
the aggregation's own (`benchmarks/aggregate.py`): they stay in `extra`, in their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record_io import OutputRecord, RecordError, always, read_record


@dataclass
class Interval(OutputRecord):
    """A headline's confidence interval (`readings._interval`)."""

    low: float | None = None
    high: float | None = None
    se: float | None = None
    level: float | None = None
    n_clusters: int | None = None


@dataclass
class RobustScore(OutputRecord):
    """The careful grader's score beside the official headline."""

    score: float | None = None
    headline: str | None = None
    headline_status: str | None = None
    interval: Interval | None = None


@dataclass
class HeadlineBasis(OutputRecord):
    """The official headline could not be computed from these records: what is reported instead, and why."""

    official: str | None = None
    reported: str | None = None
    reason: str | None = None


@dataclass
class Subset(OutputRecord):
    """What part of the benchmark the run evaluated (`summaries.subset_of`)."""

    max_samples: int | None = None
    n_available: int | None = None
    shard: str | None = None
    reason: str | None = None


@dataclass
class AlsoReported(OutputRecord):
    """A second number beside the headline, labelled (`aggregate.py`: a macro headline's pooled mean, ...)."""

    score: float | None = None
    definition: str | None = None


@dataclass
class GroupScore(OutputRecord):
    """One group of the official code's per-group report (`official_by_<field>`); score None: it awaits a judge."""

    score: float | None = None
    n: int = 0
    n_needs_judge: int = 0


OFFICIAL_BY = "official_by_"  # the key prefix of an official per-group report (its field follows)


@dataclass
class BenchmarkSummary(OutputRecord):
    """One benchmark's block of summary.json (also the in-memory aggregate the leaderboard recomputes). Fields are
    declared in the order a run writes them; every one is optional, since older files lack the later ones."""

    score: float | None = None
    metric: str = ""
    n_total: int = 0
    n_scored: int | None = None
    n_failed: int = 0
    n_pending: int | None = None
    n_dropped: int | None = None
    n_needs_judge: int = 0
    headline: str | None = None
    headline_basis: HeadlineBasis | None = None
    unavailable_breakdowns: dict[str, str] = field(default_factory=dict)
    also_reported: dict[str, AlsoReported] = field(default_factory=dict)
    offline_fallback: dict[str, Any] | None = None
    headline_status: str | None = None
    reading: str | None = None  # "official", "robust" (no official code), None (lines older than the two readings)
    chance: float | None = None  # None and present: free-form answers (~0); absent: a summary from before chance
    interval: Interval | None = None
    robust: RobustScore | None = None
    n_readings_differ: int | None = None
    n_official_guessed: int | None = None
    judge: dict[str, Any] | None = None  # the active judge's verdict counts (`verdicts.judge_info`)
    n_stale: int = 0
    stale_ids: list[str] = field(default_factory=list)
    n_bad_lines: int = 0
    bad_lines: list[str] = field(default_factory=list)
    n_expected: int | None = None
    complete: bool | None = None  # None: not recorded (a block that is no run's, or an old file)
    subset: Subset | None = None
    status: str | None = None  # complete, subset, partial, failed (`summaries.benchmark_status`)
    results_file: str | None = None  # relative to the run directory
    config_hash: str | None = None

    @property
    def chance_recorded(self) -> bool:
        """The block says what chance is (a None chance then means free-form answers, shown as ~0)."""
        return self.has("chance") or self.chance is not None

    def official_groups(self) -> dict[str, dict[str, GroupScore]]:
        """The official code's per-group reports by field (Video-MMMU tracks, TempCompass formats): the block's
        `official_by_<field>` keys, whose names no declaration can list."""
        return {key[len(OFFICIAL_BY):]: {k: GroupScore.from_json(g, f"{key}.{k}") for k, g in groups.items()}
                for key, groups in self.extra.items() if key.startswith(OFFICIAL_BY) and isinstance(groups, dict)}


@dataclass
class ShardInfo(OutputRecord):
    index: int = always(0)  # shard 0 writes its index too: a default is dropped only where absent means the default
    count: int = always(0)


@dataclass
class MergeInfo(OutputRecord):
    """Which shards a merged summary combines."""

    shards: list[str] = field(default_factory=list)
    merged_at: str | None = None


@dataclass
class PreprocessFailure(OutputRecord):
    kind: str | None = None
    video: str | None = None
    message: str | None = None


@dataclass
class RunStats(OutputRecord):
    """The run's own counters (`evaluation/execute.py`'s stats); the backend's description and the loop's counters stay
    mappings: they are what each backend and the loop choose to report."""

    mode: str | None = None
    preprocess: dict[str, Any] | None = None  # frames.preprocess.PreprocessReport.to_dict()
    startup_s: float | None = None
    backend: dict[str, Any] | None = None
    loop: dict[str, Any] | None = None
    time_to_first_request_s: float | None = None
    interrupted: bool = False
    stopped: str | None = None
    merged_from: list[dict[str, Any]] | None = None  # a merged run: each shard's wall_s and run stats

    def preprocess_failures(self) -> list[PreprocessFailure]:
        """The videos the preprocess pass could not decode, as recorded."""
        failures = (self.preprocess or {}).get("failures") or []
        return [PreprocessFailure.from_json(f, f"run.preprocess.failures[{i}]") for i, f in enumerate(failures)]


@dataclass
class Summary(OutputRecord):
    """summary.json. `merged`: a merged run's shards. `run_dir` and `merged_now` are the runner's in-memory facts
    (never written by a run): where the run is, and whether this shard's run was the last one and merged them all."""

    model: str | None = always()
    family: str | None = always()
    # complete: every selected sample has a result; status says whether the selection was the whole benchmark
    complete: bool = always(False)
    status: str | None = None  # a merged summary has none (merge writes what it always wrote)
    benchmarks: dict[str, BenchmarkSummary] = always(default_factory=dict)
    run: RunStats = always(default_factory=RunStats)
    wall_s: float | None = always()
    merged: MergeInfo | None = None
    not_run: dict[str, str] = field(default_factory=dict)  # benchmarks of the selection without data, and why
    random_weights: bool = False  # the table and the site say why its scores sit near 0
    shard: ShardInfo | None = None  # a shard's own summary (summary.shard-K-of-N.json)
    rechecked_at: list[str] = field(default_factory=list)
    run_dir: str | None = None
    merged_now: bool = field(default=False, kw_only=True, metadata={"json": False})

    def n_failed(self) -> int:
        return sum(b.n_failed for b in self.benchmarks.values())

    def n_total(self) -> int:
        return sum(b.n_total for b in self.benchmarks.values())


def read_summary_file(path: Path) -> Summary:
    """summary.json (or a shard's) as a record; RecordError when it is unreadable, not JSON, not a mapping with a
    'benchmarks' mapping, or a field has the wrong type; FileNotFoundError when there is none."""
    summary = read_record(Summary, path)
    if not summary.has("benchmarks"):
        raise RecordError(f"{path} has no 'benchmarks' mapping: not a vbench-async summary")
    return summary
