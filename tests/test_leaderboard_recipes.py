"""The evaluation recipe on the leaderboard (issue 39): every score cell says which recipe produced it, in the real
headless Chromium, and runs of one model under two recipes are two configurations, never one.

The runs are written as `vbench-async run --recipe` writes them (`make_run(recipe=...)`): the recipe's prompts and
frames in the result config, its identity in the config hash and the manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.layout import assert_readable, set_width
from test_leaderboard_browser import Page, page  # noqa: F401 - the Chromium tab fixture
from test_leaderboard_runs import make_run, right

from vbench_async.leaderboard import build_site
from vbench_async.results.manifest_record import RecipeIdentity, read_manifest_file
from vbench_async.samples import Sample

BENCHMARKS = ("demo-mc", "demo-yesno")
LAPTOP = 1440
MODEL = "model-r"
# run folder -> (recipe, its label on the board: None for the cards' own settings)
RUNS = {"r-cards": (None, None), "r-easy": ("easyvideor1", "easyvideor1 v1"), "r-qwen": ("qwen3-vl", "qwen3-vl v2")}


def _every_other(sample: Sample, i: int) -> str:
    return right(sample, i) if i % 2 else "I cannot tell."


def _one_in_three(sample: Sample, i: int) -> str:
    return right(sample, i) if i % 3 else "I cannot tell."


ANSWERS = {"r-cards": right, "r-easy": _every_other, "r-qwen": _one_in_three}  # three different scores a column


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recipes")
    return {name: make_run(root / name, MODEL, ANSWERS[name], benchmarks=BENCHMARKS, recipe=recipe)
            for name, (recipe, _) in RUNS.items()}


@pytest.fixture(scope="module")
def site(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(list(runs.values()), tmp_path_factory.mktemp("recipes-site") / "site", frames=False)


def _scores(run: Path) -> dict[str, float]:
    return {bid: b["score"] for bid, b in json.loads((run / "summary.json").read_text())["benchmarks"].items()}


# Each board row: its model cell's text and badges, and per score cell its column, value, title and recipe tag.
_READ = """Array.from(document.querySelectorAll('#leaderboard tbody tr')).map(tr => ({
  label: tr.querySelector('td.model').dataset.v,
  badges: Array.from(tr.querySelectorAll('td.model .marker')).map(b => [b.textContent, b.title]),
  cells: Array.from(tr.querySelectorAll('td[data-col]')).map(td => ({
    col: td.dataset.col, v: td.dataset.v, title: td.title, cfg: td.classList.contains('cfg'),
    recipe: td.querySelector('span.eval-recipe') ? td.querySelector('span.eval-recipe').textContent : null,
    shown: td.querySelector('span.eval-recipe') ? td.querySelector('span.eval-recipe').offsetParent !== null
      : null}))}))"""


def _board(page: Page, site: Path) -> list[dict[str, Any]]:  # noqa: F811
    page.goto((site / "index.html").as_uri())
    rows: list[dict[str, Any]] = page.js(_READ)
    assert page.errors() == []
    return rows


def test_the_board_shows_each_cell_with_its_own_recipe(page: Page, runs: dict[str, Path], site: Path) -> None:  # noqa: F811
    set_width(page, LAPTOP)
    try:
        rows = {r["label"]: r for r in _board(page, site)}
        assert_readable(page, LAPTOP, "recipe board")  # each recipe tag inside its cell, over no other text
    finally:
        page.send("Emulation.clearDeviceMetricsOverride")
    assert sorted(rows) == sorted(f"{MODEL} ({name})" for name in RUNS)  # one model: told apart by folder
    groups: dict[str, set[str]] = {}
    for name, (_, label) in RUNS.items():
        row, scores = rows[f"{MODEL} ({name})"], _scores(runs[name])
        cells = {c["col"]: c for c in row["cells"]}
        assert [c for c in cells if not c.startswith("avg: ")] == list(BENCHMARKS)
        for bid in BENCHMARKS:  # the cell under each benchmark is this run's score, with this run's recipe
            cell = cells[bid]
            assert float(cell["v"]) == pytest.approx(scores[bid]), (name, bid)
            assert cell["recipe"] == label and (label is None or cell["shown"]), (name, cell)
            assert f"; recipe {label or 'cards'}" in cell["title"], cell["title"]
            # two recipes are never one configuration: each cell's config note names its own recipe
            config = next(part for part in cell["title"].split("; ") if part.startswith("config "))
            assert f'recipe="{label or "cards"}"' in config, config
            groups.setdefault(bid, set()).add(config.split(":")[0])
        average = cells["avg: all shown"]  # the suite average carries the recipe too
        assert average["recipe"] == label and f"; recipe {label or 'cards'}" in average["title"]
        if any(c["cfg"] for c in cells.values()):  # a recipe other than the column's usual one: one badge names it
            named = [title for text, title in row["badges"] if text.startswith("recipe=")]
            assert len(named) == 1, row  # the same on both benchmarks: once
            assert named[0].startswith(f'config: recipe="{label or "cards"}"'), row
    assert groups == {bid: {"config A", "config B", "config C"} for bid in BENCHMARKS}
    assert sum(c["cfg"] for r in rows.values() for c in r["cells"] if c["col"] == "demo-mc") == 2


def test_a_single_run_board_names_its_recipe_and_the_exports_carry_it(page: Page, runs: dict[str, Path],  # noqa: F811
                                                                       site: Path, tmp_path: Path) -> None:
    manifest = read_manifest_file(runs["r-qwen"] / "manifest.json")  # the typed record the board reads
    assert manifest.recipe == RecipeIdentity(name="qwen3-vl", version=2) and manifest.recipe.label == "qwen3-vl v2"
    assert read_manifest_file(runs["r-cards"] / "manifest.json").recipe is None
    alone = build_site([runs["r-qwen"]], tmp_path / "alone", frames=False)
    (row,) = _board(page, alone)
    assert {c["col"]: c["recipe"] for c in row["cells"]} == {"demo-mc": "qwen3-vl v2", "demo-yesno": "qwen3-vl v2",
                                                              "avg: all shown": "qwen3-vl v2"}
    assert all(not c["cfg"] and "config " not in c["title"] for c in row["cells"])  # nothing to tell apart alone
    board = pd.read_csv(site / "data" / "leaderboard.csv", keep_default_na=False)
    got = {(r.run, r.column): r.recipe for r in board.itertuples()}
    assert got == {(name, col): label or "cards" for name, (_, label) in RUNS.items()
                   for col in (*BENCHMARKS, "avg: all shown")}


def test_the_benchmark_run_and_compare_pages_name_the_recipe(page: Page, site: Path) -> None:  # noqa: F811
    page.goto((site / "benchmarks" / "demo-mc.html").as_uri())
    shown = page.js("Object.fromEntries(Array.from(document.querySelectorAll('#scores tbody tr')).map(tr => "
                    "[tr.cells[0].dataset.v, "
                    "(tr.cells[0].querySelector('span.eval-recipe') || {}).textContent || null]))")
    assert shown == {f"{MODEL} ({name})": label for name, (_, label) in RUNS.items()}
    page.goto((site / "runs" / "r-easy.html").as_uri())
    facts = page.js("Object.fromEntries(Array.from(document.querySelectorAll('table.facts tr')).map(tr => "
                    "[tr.cells[0].textContent, tr.cells[1].textContent]))")
    assert facts["evaluation recipe"] == "easyvideor1 v1"
    page.goto((site / "compare" / "r-cards--r-easy.html").as_uri())
    heads = page.js("Array.from(document.querySelectorAll('#bench-demo-mc table.scores th')).map(th => "
                    "[th.childNodes[0].textContent, (th.querySelector('span.eval-recipe') || {}).textContent || null])")
    assert heads[:2] == [[f"A: {MODEL} (r-cards)", None], [f"B: {MODEL} (r-easy)", "easyvideor1 v1"]]
    assert page.errors() == []
