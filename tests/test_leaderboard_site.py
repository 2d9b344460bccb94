"""The static site from real result directories: pages, exports, markers, escaping, purity."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_leaderboard_runs import XSS, make_run, make_runs, right

from vbench_async.errors import UserError
from vbench_async.leaderboard import build_site, load_runs
from vbench_async.leaderboard.site import json_script


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def site(runs, tmp_path_factory) -> Path:
    return build_site(runs, tmp_path_factory.mktemp("site") / "site")


def _embedded(page: Path, element_id: str):
    html = page.read_text(encoding="utf-8")
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S)
    assert m, f"no data block {element_id} in {page}"
    return json.loads(m.group(1))


def test_pages_and_exports_exist(site):
    for rel in ("index.html", "benchmarks/demo-mc.html", "samples/demo-mc.html", "runs/perfect.html",
                "runs/noisy.html", "runs/partial.html", "static/site.js", "static/site.css", "data/runs.json"):
        assert (site / rel).is_file(), rel
    for table in ("leaderboard", "demo-mc.categories", "demo-mc.paired", "demo-mc.samples",
                  "demo-count.categories", "demo-yesno.samples"):
        assert (site / "data" / f"{table}.csv").is_file() and (site / "data" / f"{table}.json").is_file(), table


def test_leaderboard_export_holds_the_official_scores(site, runs):
    board = pd.read_csv(site / "data" / "leaderboard.csv")
    noisy = json.loads((runs[1] / "summary.json").read_text())["benchmarks"]
    row = board[(board["run"] == "noisy") & (board["column"] == "demo-mc")].iloc[0]
    assert row["score"] == pytest.approx(noisy["demo-mc"]["score"])
    assert row["ci_low"] < row["score"] < row["ci_high"]
    # the suite average ("demo" needs all six demo benchmarks, so here the mean of the three shown ones)
    avg = board[(board["run"] == "noisy") & (board["kind"] == "suite")].iloc[0]
    assert avg["score"] == pytest.approx(sum(noisy[b]["score"] for b in noisy) / 3)
    assert json.loads((site / "data" / "leaderboard.json").read_text())[0]["run"] == "perfect"


def test_partial_and_failed_runs_are_marked(site):
    board = pd.read_csv(site / "data" / "leaderboard.csv", keep_default_na=False)
    partial = board[(board["run"] == "partial") & (board["column"] == "demo-mc")].iloc[0]
    assert not partial["complete"] and "partial 4/11" in partial["markers"]
    failed = board[(board["run"] == "noisy") & (board["column"] == "demo-yesno")].iloc[0]
    assert "1 failed" in failed["markers"]
    html = (site / "index.html").read_text()
    assert "partial 4/11" in html and "1 failed" in html
    assert 'class="partial"' in html  # the partial run's row is marked as a whole


def test_hostile_output_is_escaped_everywhere(site):
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "window.__pwned" not in text or page.name == "demo-mc.html", page
        assert "<script>window" not in text and "<img src=x" not in text, page
    rows = _embedded(site / "samples" / "demo-mc.html", "sample-data")
    assert any(r["output"] == XSS for r in rows)  # the exact text survives, as data
    assert "\\u003c/script\\u003e" in (site / "samples" / "demo-mc.html").read_text()


def test_json_script_cannot_close_its_element():
    text = str(json_script({"x": "</script><!-- & \u2028"}))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- & \u2028"}


def test_paired_comparison_and_categories_exported(site):
    paired = json.loads((site / "data" / "demo-mc.paired.json").read_text())
    noisy = next(p for p in paired if p["run"] == "noisy")
    # 11 common samples; noisy answers 4 of them wrongly ("I cannot tell." at i = 0, 3, 6, 9)
    assert noisy["reference"] == "perfect" and noisy["n_common"] == 11
    assert (noisy["n_better"], noisy["n_worse"]) == (0, 4) and noisy["diff"] == pytest.approx(-4 / 11)
    assert noisy["sign_test"] == "mcnemar-exact" and noisy["p_sign"] == pytest.approx(2 / 16)
    partial = next(p for p in paired if p["run"] == "partial")
    assert partial["n_common"] == 4 and partial["only_reference"] == 7
    cats = pd.read_csv(site / "data" / "demo-mc.categories.csv")
    assert set(cats["breakdown"]) >= {"category", "duration", "orientation"}


def test_runs_with_different_settings_get_config_letters(runs, tmp_path):
    other = make_run(tmp_path / "eight-frames", "model-8f", right, benchmarks=("demo-mc",),
                     frame_overrides={"max_frames": 8})
    loaded = load_runs([runs[0], other])
    assert loaded[0].benchmarks["demo-mc"].config_group == "A"
    assert loaded[1].benchmarks["demo-mc"].config_group == "B"
    assert loaded[0].benchmarks["demo-count"].config_group is None  # only one run holds it
    site = build_site([runs[0], other], tmp_path / "site")
    assert "config B" in (site / "index.html").read_text()


def test_damaged_and_foreign_runs_are_shown_marked_not_scored(runs, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(runs[0], damaged)
    summary = json.loads((damaged / "summary.json").read_text())
    (damaged / summary["benchmarks"]["demo-mc"]["results_file"]).unlink()  # lost result file
    summary["benchmarks"]["future-bench"] = {**summary["benchmarks"]["demo-count"], "score": 0.5}  # unknown card
    (damaged / "summary.json").write_text(json.dumps(summary))
    site = build_site([runs[0], damaged], tmp_path / "site")
    board = pd.read_csv(site / "data" / "leaderboard.csv", keep_default_na=False)
    mc = board[(board["run"] == "damaged") & (board["column"] == "demo-mc")].iloc[0]
    assert mc["score"] == "" and "no result file" in mc["markers"] and "partial 0/11" in mc["markers"]
    future = board[(board["run"] == "damaged") & (board["column"] == "future-bench")].iloc[0]
    assert "unknown benchmark" in future["markers"]
    assert "no result file" in (site / "index.html").read_text()


def test_site_is_a_pure_function_of_the_runs(runs, site, tmp_path):
    again = build_site(runs, tmp_path / "again")
    files = sorted(p.relative_to(site) for p in site.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (site / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_rebuild_removes_pages_of_runs_no_longer_shown(runs, tmp_path):
    out = build_site(runs, tmp_path / "s")
    assert (out / "runs" / "noisy.html").exists()
    build_site(runs[:1], out)
    assert not (out / "runs" / "noisy.html").exists() and (out / "runs" / "perfect.html").exists()


def test_bad_input_is_a_clear_error(runs, tmp_path):
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        build_site(runs[:1], foreign)
    with pytest.raises(UserError, match="no summary.json"):
        build_site([tmp_path / "nothing-here"], tmp_path / "out")
    broken = tmp_path / "broken"
    shutil.copytree(runs[0], broken)
    (broken / "summary.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        build_site([broken], tmp_path / "out2")


def test_cli_leaderboard_and_compare(runs, tmp_path, capsys):
    from conftest import run_cli

    from vbench_async.cli import main

    assert main(["leaderboard", str(runs[0].parent), "-o", str(tmp_path / "cli-site")]) == 0
    assert "leaderboard of 3 run(s)" in capsys.readouterr().out and (tmp_path / "cli-site" / "index.html").exists()
    assert main(["compare", str(runs[1]), str(runs[0]), "--benchmarks", "videomme"]) == 2
    assert "not held by both runs" in capsys.readouterr().err
    proc = run_cli("compare", str(runs[1]), str(runs[0]), "--json", check=True, timeout=120)  # as a user runs it
    mc = json.loads(proc.stdout)["benchmarks"]["demo-mc"]
    assert mc["n"] == 11 and mc["n_b_better"] == 4 and mc["diff"]["value"] == pytest.approx(-4 / 11)
