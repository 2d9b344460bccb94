"""Comparison views: two runs side by side (the samples that flipped, with their frames; accuracy by category), and
accuracy against the frame budget for runs of one model that differ only in their frame settings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..results.result_config import shown
from ..results.stats import values_by_id
from ..sample_result import Result
from .board import truth_text
from .charts import Chart, line_chart, score_chart
from .load import BenchRun, Run, benchmark_ids, settings
from .thumbnails import Thumbnailer

ALL_PAIRS_UP_TO = 6  # with more runs, each run is compared with the first one only (pages grow as n, not n^2)
MAX_FLIPPED = 200  # flipped samples listed per benchmark (the rest are counted)


@dataclass
class Pair:
    a: Run
    b: Run

    @property
    def slug(self) -> str:
        return f"{self.a.id}--{self.b.id}"


def pairs(runs: list[Run]) -> list[Pair]:
    """The run pairs that get a compare page: every pair of a few runs, else each run against the first."""
    if len(runs) <= ALL_PAIRS_UP_TO:
        return [Pair(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
    return [Pair(runs[0], b) for b in runs[1:]]


def pair_sections(pair: Pair, thumbs: Thumbnailer | None) -> list[dict[str, Any]]:
    """Per common benchmark: both scores, the flipped samples (each run's answer and frames), category charts."""
    sections = []
    for bid in benchmark_ids([pair.a, pair.b]):
        ba, bb = pair.a.benchmarks.get(bid), pair.b.benchmarks.get(bid)
        if ba is None or bb is None:
            continue
        flipped = flipped_samples(ba, bb)
        sections.append({
            "id": bid, "a": ba, "b": bb, "n_flipped": len(flipped),
            "n_a_better": sum(1 for f in flipped if f["delta"] > 0),
            "n_b_better": sum(1 for f in flipped if f["delta"] < 0),
            "flipped": [_with_strips(f, thumbs) for f in flipped[:MAX_FLIPPED]],
            "charts": category_charts(bid, pair, ba, bb),
        })
    return sections


def flipped_samples(a: BenchRun, b: BenchRun) -> list[dict[str, Any]]:
    """Samples both runs hold whose scores differ (failures count as 0), largest change first, then by id."""
    va, _ = values_by_id(a.results)
    vb, _ = values_by_id(b.results)
    lines_a, lines_b = _latest_by_id(a.results), _latest_by_id(b.results)
    out = []
    for sid in sorted(set(va) & set(vb)):
        if math.isclose(va[sid], vb[sid]):
            continue
        out.append({"sample_id": sid, "delta": va[sid] - vb[sid], "score_a": va[sid], "score_b": vb[sid],
                    "line_a": lines_a[sid], "line_b": lines_b[sid]})
    out.sort(key=lambda f: (-abs(f["delta"]), f["sample_id"]))
    return out


def _latest_by_id(results: list[Result]) -> dict[str, Result]:
    return {r.sample_id: r for r in results}


def _with_strips(flip: dict[str, Any], thumbs: Thumbnailer | None) -> dict[str, Any]:
    la, lb = flip["line_a"], flip["line_b"]
    strip_a = thumbs.strip(la.frames) if thumbs is not None else None
    fa, fb = la.frames_seen(), lb.frames_seen()
    same = fa is not None and fb is not None and fa.cache_key == fb.cache_key
    strip_b = None if same or thumbs is None else thumbs.strip(lb.frames)
    return {**flip, "question": la.question or lb.question, "answer": truth_text(la.answer),
            "strip_a": strip_a.to_dict() if strip_a else None, "strip_b": strip_b.to_dict() if strip_b else None,
            "same_frames": same}


def category_charts(bid: str, pair: Pair, a: BenchRun, b: BenchRun) -> list[Chart]:
    """One bar chart per breakdown: each group's score for run A and run B, next to each other."""
    charts = []
    for breakdown in dict.fromkeys([*a.categories, *b.categories]):
        ga, gb = a.categories.get(breakdown, {}), b.categories.get(breakdown, {})
        items = []
        for group in dict.fromkeys([*ga, *gb]):
            for run, groups in ((pair.a, ga), (pair.b, gb)):
                est = groups.get(group)
                if est is not None:
                    items.append((f"{group} · {run.label}", est.value, est.ci_low, est.ci_high, False))
        if items:
            charts.append(score_chart(f"{bid} {breakdown.removeprefix('by_').replace('_', ' ')}: accuracy by group",
                                      items))
    return charts


# -- accuracy against frame budget ---------------------------------------------------------------------------------

def budget_chart(bid: str, runs: list[Run]) -> Chart | None:
    """Score against frame budget for each model with runs of `bid` that differ only in frame settings."""
    by_model: dict[str, list[tuple[float, BenchRun]]] = {}
    for r in runs:
        b = r.benchmarks.get(bid)
        if b is None or b.config is None or b.score is None:
            continue
        by_model.setdefault(r.model, []).append((frame_budget(b), b))
    series: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
    for model, cells in by_model.items():
        rest = {shown({k: v for k, v in settings(b.config, b.recipe).items() if k != "frames"})
                for _, b in cells if b.config is not None}
        budgets = {x for x, _ in cells if x is not None}
        if len(rest) != 1 or len(budgets) < 2:  # not a frame sweep: something else differs, or one budget only
            continue
        points = sorted((x, b.score, b.estimate.ci_low if b.estimate else None,
                         b.estimate.ci_high if b.estimate else None) for x, b in cells if x is not None)
        series[model] = points
    return line_chart(f"{bid}: score against frame budget (95% CI)", series, "frames") if series else None


def frame_budget(b: BenchRun) -> float | None:
    """The run's frame budget: its `max_frames` setting, else the mean number of frames its samples received."""
    frames = b.config.frames if b.config is not None else None
    for value in (frames.nframes, frames.max_frames) if frames is not None else ():  # an exact count overrides the cap
        if value is not None:
            return float(value)
    seen = [f.n for f in (r.frames_seen() for r in b.results) if f is not None]
    return sum(seen) / len(seen) if seen else None
