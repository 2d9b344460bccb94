"""The site's tables as pandas DataFrames: what the pages show is exactly what the CSV/JSON exports hold.

Scores are fractions in [0, 1] here; pages print them as percentages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..results.stats import Estimate, combine_independent, paired_compare, values_by_id
from ..results.summaries import run_status
from .families import bench_frames, grouped, run_family
from .load import BenchRun, Run, benchmark_ids


def _ci(prefix: str, est: Estimate | None) -> dict[str, Any]:
    if est is None:
        return {f"{prefix}se": None, f"{prefix}ci_low": None, f"{prefix}ci_high": None}
    return {f"{prefix}se": est.se, f"{prefix}ci_low": est.ci_low, f"{prefix}ci_high": est.ci_high}


def suites_for(bids: list[str]) -> dict[str, list[str]]:
    """Built-in suites with at least two benchmarks, all of them among `bids`, plus the mean over every shown one."""
    from ..benchmarks import list_suites, load_suite
    from ..benchmarks.registry import suite_files

    out: dict[str, list[str]] = {}
    files = suite_files()
    for name in list_suites():
        members = list(dict.fromkeys(load_suite(files[name])[1]))
        if len(members) > 1 and set(members) <= set(bids):
            out[name] = members
    if len(bids) > 1 and sorted(bids) not in [sorted(m) for m in out.values()]:
        out["all shown"] = list(bids)
    return out


MAIN_COLUMNS = ["run", "model", "family", "frames", "recipe", "column", "kind", "score", "se", "ci_low", "ci_high",
                "reading", "robust_score", "robust_ci_low", "robust_ci_high", "n_readings_differ", "n_official_guessed",
                "n_total", "n_expected",
                "n_failed", "n_needs_judge", "complete", "status", "subset", "config_group", "markers", "metric",
                "headline", "headline_reported_instead", "unavailable_breakdowns"]


def _benchmark_row(r: Run, bid: str, b: BenchRun) -> dict[str, Any]:
    """One benchmark cell: the official headline with its CI, the robust score beside it, how many samples the two
    readings disagree on, and why the headline is not the official aggregation where the records cannot give it."""
    agg = b.aggregate
    basis = agg.headline_basis if agg.headline_basis is not None and agg.headline_basis.to_json() else None
    robust = _ci("robust_", b.robust_estimate)
    return {"run": r.id, "model": r.label, "family": run_family(r), "frames": bench_frames(b), "recipe": b.recipe,
            "column": bid, "kind": "benchmark", "score": b.score,
            **_ci("", b.estimate), "reading": agg.reading, "robust_score": b.robust_score,
            "robust_ci_low": robust["robust_ci_low"], "robust_ci_high": robust["robust_ci_high"],
            "n_readings_differ": agg.n_readings_differ, "n_official_guessed": agg.n_official_guessed,
            "n_total": len(b.results), "n_expected": b.n_expected, "n_failed": int(agg.n_failed or 0),
            "n_needs_judge": int(agg.n_needs_judge or 0), "complete": b.complete and not b.subset,
            "status": b.status, "subset": b.subset.reason if b.subset else None, "config_group": b.config_group,
            "markers": "; ".join(b.markers), "metric": agg.metric or "", "headline": agg.headline or "",
            "headline_reported_instead": (f"{basis.reported} instead of {basis.official}: {basis.reason}"
                                          if basis else None),
            "unavailable_breakdowns": "; ".join(f"{k}: {v}" for k, v in agg.unavailable_breakdowns.items()) or None}


@dataclass(frozen=True)
class Column:
    """One column of the board: a benchmark (`id` = its id) or a suite average (`id` = "avg: <suite>")."""

    id: str
    kind: str  # "benchmark" or "suite"
    members: tuple[str, ...] = ()  # a suite's benchmarks


@dataclass
class Board:
    """The board's one keyed structure: per run, column id -> that run's main-table row. The index table, its
    tooltips, the average charts, the ranks and the CSV/JSON exports all read cells by (run, column id), never by
    position, so a column always holds one benchmark whatever mix of runs is shown.

    `runs` are in row order (grouped by model family); `columns` the benchmarks in first-seen order, then the suite
    averages that at least one run has."""

    runs: list[Run]
    columns: list[Column]
    suites: dict[str, list[str]]
    cells: dict[str, dict[str, dict[str, Any]]]  # run id -> column id -> row (the CSV/JSON row)

    def cell(self, run: Run | str, column: Column | str) -> dict[str, Any] | None:
        rid = run if isinstance(run, str) else run.id
        cid = column if isinstance(column, str) else column.id
        return self.cells.get(rid, {}).get(cid)

    def column(self, cid: str) -> list[tuple[Run, dict[str, Any]]]:
        """The runs holding a cell in column `cid`, in row order, with their cells."""
        return [(r, c) for r in self.runs if (c := self.cell(r, cid)) is not None]

    def frame(self) -> pd.DataFrame:
        """The long-form table (one row per run and column, in row then column order): the CSV/JSON exports."""
        rows = [c for r in self.runs for col in self.columns if (c := self.cell(r, col)) is not None]
        return pd.DataFrame(rows, columns=MAIN_COLUMNS)


def _suite_row(r: Run, suite: str, members: list[str]) -> dict[str, Any] | None:
    """A run's average over a suite's benchmarks; None unless it holds a score on every one of them."""
    cells = [r.benchmarks.get(m) for m in members]
    if any(c is None or c.score is None for c in cells):
        return None  # an average over some of a suite's benchmarks would pass for the suite's
    present = [c for c in cells if c is not None]
    ests = [c.estimate if c.estimate is not None else Estimate(c.score, None, None, None, len(c.results), 0)
            for c in present]
    avg = combine_independent(ests)
    groups = sorted({c.config_group for c in present if c.config_group})
    failed = sum(int(c.aggregate.n_failed or 0) for c in present)
    judge = sum(int(c.aggregate.n_needs_judge or 0) for c in present)
    subset = any(c.subset for c in present)
    complete = all(c.complete for c in present)
    markers = ([] if complete else ["partial"]) + (["subset"] if subset else []) + \
        ([f"{failed} failed"] if failed else []) + ([f"{judge} need judge"] if judge else [])
    return {"run": r.id, "model": r.label, "family": run_family(r),
            "frames": "; ".join(dict.fromkeys(bench_frames(c) for c in present)),
            "recipe": ", ".join(dict.fromkeys(c.recipe for c in present if c.recipe)) or None,
            "column": f"avg: {suite}", "kind": "suite",
            "score": avg.value, **_ci("", avg), "n_total": sum(len(c.results) for c in present),
            "n_expected": sum(c.n_expected for c in present),
            "n_failed": failed, "n_needs_judge": judge,
            "complete": complete and not subset,
            "status": run_status({c.benchmark: {"status": c.status} for c in present}),  # the worst, as summary.json
            "config_group": ",".join(groups) or None,
            "markers": "; ".join(markers + (["config differs"] if groups else [])),
            "metric": "mean of benchmark scores", "headline": ", ".join(members)}


def board_of(runs: list[Run]) -> Board:
    """Every run's cells, keyed by column id: benchmark scores with CI, robust score, counts, markers; suite averages
    (of the headlines) for runs holding every benchmark of the suite. Runs are grouped by model family."""
    bids = benchmark_ids(runs)
    suites = suites_for(bids)
    ordered = grouped(runs)
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for r in ordered:
        mine = cells.setdefault(r.id, {})
        for bid in bids:
            b = r.benchmarks.get(bid)
            if b is not None:
                mine[bid] = _benchmark_row(r, bid, b)
        for suite, members in suites.items():
            row = _suite_row(r, suite, members)
            if row is not None:
                mine[row["column"]] = row
    columns = [Column(b, "benchmark") for b in bids]
    columns += [Column(f"avg: {s}", "suite", tuple(m)) for s, m in suites.items()
                if any(f"avg: {s}" in cells[r.id] for r in ordered)]
    return Board(ordered, columns, suites, cells)


def main_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run and benchmark (long form): score, CI, robust score, counts, markers; suite averages as extra
    rows (of the headlines). Runs are grouped by model family; each row says the frame settings it was run with.
    The rows of `board_of(runs)`, the structure the index page is drawn from."""
    return board_of(runs).frame()


def category_table(runs: list[Run], bid: str) -> pd.DataFrame:
    """Per run, breakdown and group: mean with CI (the official breakdown names)."""
    rows: list[dict[str, Any]] = []
    for r in runs:
        b = r.benchmarks.get(bid)
        if b is None:
            continue
        for breakdown, groups in b.categories.items():
            for group, est in groups.items():
                rows.append({"run": r.id, "model": r.label, "breakdown": breakdown.removeprefix("by_"),
                             "group": group, "score": est.value, **_ci("", est), "n": est.n,
                             "n_clusters": est.n_clusters})
    return pd.DataFrame(rows, columns=["run", "model", "breakdown", "group", "score", "se", "ci_low", "ci_high", "n",
                                       "n_clusters"])


def paired_table(runs: list[Run], bid: str) -> pd.DataFrame:
    """Every other run against the first one holding the benchmark, on their common sample ids."""
    holders = [r for r in runs if bid in r.benchmarks]
    rows: list[dict[str, Any]] = []
    if len(holders) < 2:
        return pd.DataFrame(rows)
    ref = holders[0]
    ref_vals, clusters = values_by_id(ref.benchmarks[bid].scored)  # the headline's reading
    for other in holders[1:]:
        vals, more = values_by_id(other.benchmarks[bid].scored)
        cmp = paired_compare(vals, ref_vals, {**more, **clusters})
        rows.append({"run": other.id, "model": other.label, "reference": ref.id, "reference_model": ref.label,
                     "n_common": cmp.n, "mean": cmp.mean_a, "reference_mean": cmp.mean_b, "diff": cmp.diff.value,
                     "diff_se": cmp.diff.se, "diff_ci_low": cmp.diff.ci_low, "diff_ci_high": cmp.diff.ci_high,
                     "t": cmp.t, "df": cmp.df, "p_t": cmp.p_t, "n_better": cmp.n_a_better,
                     "n_worse": cmp.n_b_better, "n_ties": cmp.n_ties, "p_sign": cmp.p_sign,
                     "sign_test": cmp.sign_test_name, "only_run": cmp.only_a, "only_reference": cmp.only_b,
                     "config_differs": (other.benchmarks[bid].config_group or "")
                     != (ref.benchmarks[bid].config_group or "")})
    return pd.DataFrame(rows)


def samples_table(runs: list[Run], bid: str) -> pd.DataFrame:
    """Every result line of the benchmark, one row per run and sample, with both readings' scores and whether they
    differ (`readings_differ`: the sample is in `BenchRun.differing_ids`)."""
    rows: list[dict[str, Any]] = []
    for r in runs:
        b = r.benchmarks.get(bid)
        if b is None:
            continue
        differ = set(b.differing_ids)
        for x in b.results:
            err = x.error or {}
            judge, official = x.judge_verdict(), x.reading("official")
            rows.append({"run": r.id, "model": r.label, "sample_id": x.sample_id,
                         "task_type": x.task_type or None, "video": x.video, "question": x.question,
                         "options": list(x.options), "answer": x.answer,
                         "output": x.output, "extracted": x.extracted, "score": x.score,
                         "official_score": None if err else x.value_under("official"),
                         "official_extracted": official.extracted if official is not None else None,
                         "robust_score": None if err else x.value_under("robust"),
                         "readings_differ": x.sample_id in differ,
                         "well_formed": x.well_formed, "judge_verdict": judge.verdict if judge is not None else None,
                         "error_kind": x.error_kind, "error": x.error_message if err else None,
                         "fields": dict(x.fields), "prompt": x.prompt,
                         "frames": _frames_seen(x.frames)})
    return pd.DataFrame(rows, columns=["run", "model", "sample_id", "task_type", "video", "question", "options",
                                       "answer", "output", "extracted", "score", "official_score",
                                       "official_extracted", "robust_score", "readings_differ", "well_formed",
                                       "judge_verdict", "error_kind", "error", "fields", "prompt", "frames"])


def _frames_seen(frames: Any) -> dict[str, Any] | None:
    """A line's frame record for the export, without the video's path on the machine that ran it."""
    return {k: v for k, v in frames.items() if k != "source"} if isinstance(frames, dict) else None


@dataclass(frozen=True)
class ScoreCell:
    """What a chart or a rank reads of a main-table row (one run x one benchmark or suite average); the templates get
    the whole row."""

    model: str
    score: float | None
    ci_low: float | None
    ci_high: float | None
    flagged: bool  # the row carries markers (a subset, a differing config, ...)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> ScoreCell:
        return cls(str(row["model"]), row["score"], row["ci_low"], row["ci_high"], bool(row["markers"]))

    def chart_item(self) -> tuple[str, float | None, float | None, float | None, bool]:
        return self.model, self.score, self.ci_low, self.ci_high, self.flagged


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts with None for missing values (NaN is not JSON, and not a number to show)."""
    if df.empty:
        return []
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def plain_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as `records` gives it: None for missing values, plain Python numbers."""
    return {k: _plain(v) for k, v in row.items()}


def _plain(v: Any) -> Any:
    if _missing(v):
        return None
    return v.item() if isinstance(v, np.generic) else v  # numpy scalars -> int / float / bool for JSON


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v)) if not isinstance(v, (list, dict, tuple)) else False
    except (TypeError, ValueError):
        return False
