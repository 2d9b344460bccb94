"""Geometry of the inline SVG charts (the templates draw it; labels go through autoescape like any text).

Two charts, both horizontal, one row per run: scores with their 95% CI whiskers (0-100 %), and paired differences
against a reference run with their CIs around a zero line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .names import short_labels

LABEL_W = 280  # room for the run labels, left of the plot
LABEL_CHARS = 36  # a label longer than this is cut (whole in its tooltip): 12 px text fits LABEL_W
PLOT_W = 420
ROW_H = 26
TOP = 22  # room for the tick labels


@dataclass(frozen=True)
class Row:
    label: str
    text: str  # the number printed right of the row
    y: float  # row centre
    x0: float  # bar start (scores) or zero line (differences)
    x: float  # the value
    lo: float | None  # whisker ends, None without a CI
    hi: float | None
    flagged: bool  # partial / failed / config differs: drawn hatched
    short: str = ""  # the label as drawn (`names.short_labels`); the whole label is its tooltip


@dataclass(frozen=True)
class Chart:
    title: str
    width: int
    height: int
    rows: list[Row]
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (x, label)
    zero: float | None = None  # x of the zero line (differences)
    kind: str = "bars"
    label_x: int = LABEL_W - 6  # where labels end (right-aligned)


def _labelled(rows: list[Row]) -> list[Row]:
    """The rows with their drawn labels, shortened together so that what tells them apart stays."""
    return [replace(r, short=s) for r, s in zip(rows, short_labels([r.label for r in rows], LABEL_CHARS))]


def _scale(lo: float, hi: float):
    return lambda v: LABEL_W + (min(max(v, lo), hi) - lo) / (hi - lo) * PLOT_W


def score_chart(title: str, items: list[tuple[str, float | None, float | None, float | None, bool]]) -> Chart:
    """items: (label, score, ci_low, ci_high, flagged) with scores in [0, 1]."""
    x = _scale(0.0, 1.0)
    rows = []
    for label, value, lo, hi, flagged in items:
        if value is None:
            continue
        rows.append(Row(label=label, text=f"{100 * value:.1f}", y=TOP + ROW_H * (len(rows) + 0.5), x0=x(0.0),
                        x=x(value), lo=x(lo) if lo is not None else None, hi=x(hi) if hi is not None else None,
                        flagged=flagged))
    ticks = [(x(t / 100), f"{t}") for t in range(0, 101, 20)]
    return Chart(title, LABEL_W + PLOT_W + 60, int(TOP + ROW_H * max(len(rows), 1) + 8), _labelled(rows), ticks)


def diff_chart(title: str, items: list[tuple[str, float | None, float | None, float | None, bool]]) -> Chart:
    """items: (label, difference, ci_low, ci_high, flagged) in score units (differences of fractions)."""
    present = [it for it in items if it[1] is not None]
    extent = max([abs(v) for it in present for v in it[1:4] if v is not None] + [0.01])
    extent = min(1.0, extent * 1.1)
    x = _scale(-extent, extent)
    rows = [Row(label=label, text=f"{100 * d:+.1f}", y=TOP + ROW_H * (i + 0.5), x0=x(0.0), x=x(d),
                lo=x(lo) if lo is not None else None, hi=x(hi) if hi is not None else None, flagged=flagged)
            for i, (label, d, lo, hi, flagged) in enumerate(present)]
    ticks = [(x(f * extent), f"{100 * f * extent:+.1f}") for f in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    return Chart(title, LABEL_W + PLOT_W + 60, int(TOP + ROW_H * max(len(rows), 1) + 8), _labelled(rows), ticks,
                 zero=x(0.0), kind="diff")


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    lo: float | None
    hi: float | None
    label: str  # "32 frames: 45.0"


@dataclass(frozen=True)
class Series:
    label: str
    points: list[Point]
    path: str  # SVG polyline points


@dataclass(frozen=True)
class LineChart:
    title: str
    width: int
    height: int
    series: list[Series]
    xticks: list[tuple[float, str]]
    yticks: list[tuple[float, str]]
    kind: str = "lines"


LINE_H = 220  # plot height of a line chart


def line_chart(title: str, series: dict[str, list[tuple[float, float, float | None, float | None]]],
               unit: str) -> LineChart:
    """series: label -> [(x, score, ci_low, ci_high)] with scores in [0, 1]; x on a log2 axis (frame budgets double)."""
    import math

    xs = sorted({p[0] for pts in series.values() for p in pts if p[0] > 0})
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    span = hi - lo or 1.0
    left, top = 60, TOP

    def px(v: float) -> float:
        return left + (math.log2(v) - lo) / span * PLOT_W

    def py(v: float) -> float:
        return top + (1.0 - min(max(v, 0.0), 1.0)) * LINE_H

    out = []
    for label, pts in series.items():
        points = [Point(px(x), py(y), py(a) if a is not None else None, py(b) if b is not None else None,
                        f"{x:g} {unit}: {100 * y:.1f}") for x, y, a, b in pts if x > 0]
        out.append(Series(label, points, " ".join(f"{p.x:.1f},{p.y:.1f}" for p in points)))
    return LineChart(title, left + PLOT_W + LABEL_W, int(top + LINE_H + 30), out,
                     [(px(x), f"{x:g}") for x in xs], [(py(t / 100), f"{t}") for t in range(0, 101, 20)])
