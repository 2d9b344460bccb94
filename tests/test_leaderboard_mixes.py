"""One column, one benchmark, for any mix of runs: boards over random mixes of runs (different benchmark sets and
orders, a user benchmark, a different frame preset, a partial run, the same model twice, two families), every score
distinct and non-zero, each rendered cell checked against its run's own summary.json: the table's cells, their
tooltips, the headers above them, the average charts, and the CSV/JSON exports. A fast check parses the HTML; the
browser check reads the rendered page in a real headless Chromium over 80 mixes.

The runs are written by the real result store, line builder, scorers and summary writer (test_leaderboard_runs)."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import time
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_leaderboard_browser import page  # noqa: F401 - the Chromium tab fixture
from test_leaderboard_runs import make_run, right

from vbench_async.benchmarks import include
from vbench_async.leaderboard import build_site, load_runs
from vbench_async.leaderboard.site import environment, index_html
from vbench_async.leaderboard.tables import board_of, records, suites_for
from vbench_async.samples import Sample, parse_record

DEMO = ("demo-mc", "demo-count", "demo-tg", "demo-stvg", "demo-ocr", "demo-yesno")  # the demo suite, 11 samples each
MINE = "mine"  # a user benchmark (an included card), 11 samples
MINE_CARD = {"id": MINE, "name": "Mine", "sources": {"unified": {"annotation": "mine.jsonl", "video_dir": "v"}},
             "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy"}


@dataclass(frozen=True)
class Spec:
    name: str  # the run folder
    model: str
    benchmarks: tuple[str, ...]
    family: str = "qwen2.5-vl"
    frames: dict | None = None
    keep: int | None = None  # a partial run


POOL = (
    Spec("demo", "tiny-qwen2.5-vl", DEMO),
    Spec("rl-all", "tiny-qwen2.5-vl-rl", (*DEMO, MINE)),  # the issue's repro: the demo suite plus a user benchmark
    Spec("mine-only", "user-model", (MINE,)),
    Spec("pair", "model-pair", ("demo-yesno", "demo-mc")),
    Spec("three", "qwen3-small", ("demo-count", "demo-ocr", "demo-tg"), family="qwen3-vl"),
    Spec("demo-8f", "tiny-qwen2.5-vl", DEMO, frames={"max_frames": 8}),  # same model, another preset
    Spec("mine-first", "model-mine-first", (MINE, "demo-stvg", "demo-mc"), family="qwen3-vl"),
    Spec("reversed", "qwen3-reversed", (*DEMO[::-1], MINE), family="qwen3-vl"),
    Spec("partial", "model-partial", ("demo-mc", "demo-yesno"), keep=8),
    Spec("yesno", "model-yesno", ("demo-yesno",)),
)


def _mine_samples() -> list[Sample]:
    options = ["A. red", "B. blue", "C. green"]
    return [parse_record({"problem": "Which colour is the ball?", "problem_type": "multiple choice",
                          "options": options, "solution": "<answer>A</answer>", "problem_id": i,
                          "path": f"v{i}.mp4"}, MINE, i) for i in range(11)]


def _answers(right_counts: dict[str, int]):
    """Right on the first k samples of each benchmark, then no answer: a score of k / n."""
    def answer(sample: Sample, i: int) -> str:
        return right(sample, i) if i < right_counts[sample.benchmark] else "I cannot tell."
    return answer


def user_cards(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MINE}.yaml").write_text(yaml.safe_dump(MINE_CARD), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, Path]:
    """The pool's run folders by name, with the user benchmark's card known to the registry while the module runs.
    Run j answers k = 1 + (3j + i) % 10 samples of its i-th benchmark right: within a run and within a column every
    score differs, and none is 0 or 100."""
    root = tmp_path_factory.mktemp("mixes")
    with include.included(user_cards(root / "cards")):
        out = {}
        for j, spec in enumerate(POOL):
            counts = {bid: 1 + (3 * j + i) % 10 for i, bid in enumerate(spec.benchmarks)}
            out[spec.name] = make_run(root / "runs" / spec.name, spec.model, _answers(counts),
                                      benchmarks=spec.benchmarks, keep=spec.keep, frame_overrides=spec.frames,
                                      samples={MINE: _mine_samples()}, family=spec.family)
        for run in out.values():  # the property rests on distinct, non-zero scores
            scores = [b["score"] for b in json.loads((run / "summary.json").read_text())["benchmarks"].values()]
            assert all(0 < s < 1 for s in scores) and len(set(scores)) == len(scores), run
        yield out


@pytest.fixture
def loaded(pool, monkeypatch):
    """`load_runs` as the site calls it, each pool run read from its folder once: `load_run` hands out copies of the
    first reading (load_runs then sets ids, labels and config letters per mix, as always; the result lines, which it
    does not change, are shared). Returns a jinja2 environment to render with, its templates compiled once."""
    from vbench_async.leaderboard import load as load_module

    read: dict[Path, Any] = {}
    real = load_module.load_run

    def load_run(run_dir: Path):
        if run_dir not in read:
            read[run_dir] = real(run_dir)
        run = read[run_dir]
        return replace(run, benchmarks={bid: replace(b) for bid, b in run.benchmarks.items()})

    monkeypatch.setattr(load_module, "load_run", load_run)
    return environment()


# -- what a board must show, from the runs' own summaries ----------------------------------------------------------
def expected(run_dirs: list[Path]) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """(column ids in order, per row label: column id -> score in [0, 1] or None where the run has no score there),
    read from each run's summary.json, never from the board's own structures."""
    summaries = [json.loads((d / "summary.json").read_text()) for d in run_dirs]
    bids = list(dict.fromkeys(b for s in summaries for b in s["benchmarks"]))
    suites = suites_for(bids)
    models = [s["model"] for s in summaries]
    rows: dict[str, dict[str, float | None]] = {}
    for d, s in zip(run_dirs, summaries):
        label = s["model"] if models.count(s["model"]) == 1 else f"{s['model']} ({d.name})"
        scores = {bid: b.get("score") for bid, b in s["benchmarks"].items()}
        row: dict[str, float | None] = {bid: scores.get(bid) for bid in bids}
        for name, members in suites.items():
            got = [scores.get(m) for m in members]
            row[f"avg: {name}"] = None if any(g is None for g in got) else sum(got) / len(got)
        rows[label] = row
    averages = [f"avg: {n}" for n in suites if any(r[f"avg: {n}"] is not None for r in rows.values())]
    return bids + averages, rows


def check_board(board: dict[str, Any], run_dirs: list[Path]) -> int:
    """Every header, cell, tooltip and chart value of a rendered board against the runs' summaries; returns the
    number of score cells checked. `board`: what `_READ_BOARD` returns (or `read_board` parses)."""
    columns, rows = expected(run_dirs)
    assert [h["col"] for h in board["headers"]] == columns
    for h in board["headers"]:
        assert h["text"] == ("average" if h["col"].startswith("avg: ") else h["col"]), h
    assert sorted(r["label"] for r in board["rows"]) == sorted(rows)
    n = 0
    for r in board["rows"]:
        want = rows[r["label"]]
        assert len(r["cells"]) == len(columns), r["label"]
        for header, cell in zip(board["headers"], r["cells"]):
            col = header["col"]  # the column this cell is drawn under
            where = (r["label"], col)
            assert cell["col"] == col, where
            value = want[col]
            if value is None:
                assert cell["v"] == "" and cell["text"].startswith("–"), (where, cell)
                continue
            assert math.isclose(float(cell["v"]), value, rel_tol=1e-9, abs_tol=1e-12), (where, cell, value)
            assert cell["text"].rstrip("†") == f"{100 * value:.1f}", (where, cell)
            assert cell["title"].startswith(f"{col}: {100 * value:.2f}"), (where, cell)
            n += 1
    charts = {c["caption"].removesuffix(": mean score with 95% CI"): c["rows"] for c in board["charts"]}
    averages = [c for c in columns if c.startswith("avg: ")]
    assert sorted(charts) == sorted(c.removeprefix("avg: ") for c in averages)
    for col in averages:
        shown = {label: text.rstrip(" †") for label, text in charts[col.removeprefix("avg: ")]}
        assert shown == {label: f"{100 * row[col]:.1f}" for label, row in rows.items() if row[col] is not None}, col
    return n


def check_exports(records: list[dict[str, Any]], csv_text: str, run_dirs: list[Path]) -> None:
    """The board's JSON records and CSV: one row per run and column, each score its run's own, each run's rows in
    the board's column order."""
    columns, rows = expected(run_dirs)
    table = list(csv.DictReader(io.StringIO(csv_text)))
    want = {(label, col): v for label, row in rows.items() for col, v in row.items() if v is not None}
    for got in (records, table):
        seen = {(r["model"], r["column"]): r["score"] for r in got}
        assert set(seen) == set(want)
        for key, value in want.items():
            assert math.isclose(float(seen[key]), value, rel_tol=1e-9), key
    for label, row in rows.items():
        assert [r["column"] for r in records if r["model"] == label] == [c for c in columns if row[c] is not None]


def check_site_exports(site: Path, run_dirs: list[Path]) -> None:
    check_exports(json.loads((site / "data" / "leaderboard.json").read_text()),
                  (site / "data" / "leaderboard.csv").read_text(), run_dirs)


class _BoardParser(HTMLParser):
    """The index table's headers and cells and the charts' rows, as the browser check reads them (text content)."""

    def __init__(self) -> None:
        super().__init__()
        self.board: dict[str, Any] = {"headers": [], "rows": [], "charts": []}
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] | None = None
        self.target: dict[str, Any] | None = None
        self.section = ""
        self.in_board = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self.in_board = a.get("id") == "leaderboard"
        if self.in_board and tag in ("thead", "tbody", "tfoot"):
            self.section = tag
        if self.in_board and tag == "tr" and self.section == "tbody":
            self.board["rows"].append({"label": None, "cells": []})
        if self.in_board and tag == "th" and "data-col" in a and self.section == "thead":
            self._start({"col": a["data-col"], "text": ""}, "header")
        if self.in_board and tag == "td" and self.section == "tbody":
            if "model" in a.get("class", "").split():
                self.board["rows"][-1]["label"] = a["data-v"]
            elif "data-col" in a:
                self._start({"col": a["data-col"], "v": a["data-v"], "title": a.get("title", ""), "text": ""},
                            "cell")
        if tag == "figcaption":
            self._start({"caption": "", "rows": []}, "chart")
        if tag == "g" and "row" in a.get("class", "").split():
            self.board["charts"][-1]["rows"].append(["", ""])
        if tag == "title" and self.stack and self.stack[-1][0] == "text":
            self._start({}, "chart-label")
        if tag == "text" and "value" in a.get("class", "").split():
            self._start({}, "chart-value")
        if tag == "button" and self.target is not None and self.target.get("kind") == "header":
            self.text = []
        self.stack.append((tag, a))

    def _start(self, target: dict[str, Any], kind: str) -> None:
        self.target = {**target, "kind": kind}
        self.text = []

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()
        if tag == "table":
            self.in_board = False
        t, text = self.target, "".join(self.text or []).strip()
        if t is None:
            return
        kind = t["kind"]
        if kind == "header" and tag == "button":
            self.board["headers"].append({"col": t["col"], "text": text})
            self.target = self.text = None
        elif kind == "cell" and tag == "td":
            self.board["rows"][-1]["cells"].append({"col": t["col"], "v": t["v"], "title": t["title"], "text": text})
            self.target = self.text = None
        elif kind == "chart" and tag == "figcaption":
            self.board["charts"].append({"caption": text, "rows": []})
            self.target = self.text = None
        elif kind == "chart-label" and tag == "title":
            self.board["charts"][-1]["rows"][-1][0] = text
            self.target = self.text = None
        elif kind == "chart-value" and tag == "text":
            self.board["charts"][-1]["rows"][-1][1] = text
            self.target = self.text = None


def read_board(html: str) -> dict[str, Any]:
    parser = _BoardParser()
    parser.feed(html)
    return parser.board


# In the page: the headers over the board's score columns, each row's label and its score cells (in place order; the
# model-fact and average-rank columns carry no data-col), and the average charts' rows (label from the <title>, value
# text).
_READ_BOARD = """(() => {
  const text = e => e.textContent.trim();
  const headers = Array.from(document.querySelectorAll('#leaderboard thead th[data-col]')).map(th =>
    ({col: th.dataset.col, text: text(th.querySelector('button'))}));
  const rows = Array.from(document.querySelectorAll('#leaderboard tbody tr')).map(tr => ({
    label: tr.querySelector('td.model').dataset.v,
    cells: Array.from(tr.querySelectorAll('td[data-col]')).map(td => ({col: td.dataset.col, v: td.dataset.v,
                                                                      title: td.title, text: text(td)}))}));
  const charts = Array.from(document.querySelectorAll('figure.chart')).map(f => ({
    caption: text(f.querySelector('figcaption')),
    rows: Array.from(f.querySelectorAll('g.row')).map(g => [text(g.querySelector('text.label title')),
                                                           text(g.querySelector('text.value'))])}));
  return {headers, rows, charts};
})()"""

mixes = st.lists(st.sampled_from([s.name for s in POOL]), min_size=1, max_size=6, unique=True)


def test_the_issue_repro_puts_the_user_benchmark_in_its_own_column(pool, tmp_path):
    """The six demo benchmarks beside the same plus `mine`, in both orders: `mine` holds the second run's own score,
    the first run shows none there, and each average sits under its own header."""
    for names in (["demo", "rl-all"], ["rl-all", "demo"]):
        dirs = [pool[n] for n in names]
        site = build_site(dirs, tmp_path / "-".join(names), frames=False)
        board = read_board((site / "index.html").read_text())
        assert check_board(board, dirs) == 7 + 9  # demo: 6 + its average; rl-all: 7 + avg demo + avg all shown
        check_site_exports(site, dirs)
        row = {r["label"]: {c["col"]: c for c in r["cells"]} for r in board["rows"]}
        mine = json.loads((pool["rl-all"] / "summary.json").read_text())["benchmarks"][MINE]["score"]
        assert row["tiny-qwen2.5-vl-rl"][MINE]["text"] == f"{100 * mine:.1f}"
        assert row["tiny-qwen2.5-vl"][MINE]["title"] == f"{MINE}: not run"


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(names=mixes)
def test_every_cell_is_its_runs_own_over_random_mixes(pool, loaded, names):
    """The fast check, on the same structure: the index page (parsed here) and the exports' rows over random mixes."""
    dirs = [pool[n] for n in names]
    runs = load_runs(dirs)
    assert check_board(read_board(index_html(runs, loaded)), dirs) >= 1
    frame = board_of(runs).frame()
    check_exports(records(frame), frame.to_csv(index=False), dirs)


def test_every_rendered_cell_is_its_runs_own_in_a_browser_over_80_mixes(page, pool, loaded, tmp_path):  # noqa: F811
    """The board of each of 80 random mixes rendered and read back in one Chromium tab: headers, cells, tooltips
    and average charts against the runs' summaries; no console error on any."""
    from vbench_async.resources import data_dir

    shutil.copytree(data_dir("leaderboards") / "static", tmp_path / "static")  # the pages' script and styles
    seen: list[tuple[str, ...]] = []
    cells = 0
    spent = {"python": 0.0, "browser": 0.0}
    started = time.monotonic()

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(names=mixes)
    def one_mix(names: list[str]) -> None:
        nonlocal cells
        dirs = [pool[n] for n in names]
        path = tmp_path / f"mix-{len(seen)}.html"
        t0 = time.monotonic()
        path.write_text(index_html(load_runs(dirs), loaded), encoding="utf-8")
        t1 = time.monotonic()
        page.goto(path.as_uri())
        board = page.js(_READ_BOARD)
        assert page.errors() == [], names
        page.events.clear()  # this page's events are read: the next page's scan starts empty
        t2 = time.monotonic()
        cells += check_board(board, dirs)
        spent["python"] += t1 - t0
        spent["browser"] += t2 - t1
        seen.append(tuple(names))

    one_mix()
    elapsed = time.monotonic() - started
    print(f"{len(seen)} mixes ({len(set(seen))} distinct), {cells} cells checked in the browser in {elapsed:.1f} s "
          f"(rendering {spent['python']:.1f} s, loading and reading pages {spent['browser']:.1f} s)")
    assert len(set(seen)) >= 80 and cells > 400
