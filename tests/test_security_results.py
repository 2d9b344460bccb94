"""Hand-edited run directories are reported, never silently believed (issue 37): a duplicate result line for an
answered sample (appended with score 1.0, it replaced the earlier line without a word: headline 66.67 -> 100.00) is
reported with its file and lines; valid JSON of the wrong shape in one run's summary.json or manifest.json (it
crashed `leaderboard` for every run with a traceback; `null` read as "no summary.json") is reported for that run
while the others are still built."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_leaderboard_runs import make_run, right

from vbench_async.errors import UserError
from vbench_async.leaderboard import build_site, load_runs
from vbench_async.results.lines import BadLine
from vbench_async.results.result_file import read_results


def _wrong_first(sample, i: int) -> str:
    return "The answer is Z" if i == 0 else right(sample, i)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "clean", "model-clean", _wrong_first, benchmarks=("demo-mc",),
                    keep=3)


def _results_file(run: Path) -> Path:
    (path,) = (run / "results").glob("*.jsonl")
    return path


def test_a_duplicate_line_for_an_answered_sample_is_reported(clean_run: Path, tmp_path: Path, caplog) -> None:
    import shutil

    run = tmp_path / "dup"
    shutil.copytree(clean_run, run)
    path = _results_file(run)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["error"] is None and first["score"] == 0.0
    with path.open("a", encoding="utf-8") as fh:  # the hostile edit: the same sample again, now right
        fh.write(json.dumps({**first, "score": 1.0}) + "\n")

    bad: list[BadLine] = []
    with caplog.at_level(logging.WARNING):
        results = read_results(path, problems=bad)
    assert len(results) == 3
    assert [(b.lineno, "replaced by line 4" in b.problem) for b in bad] == [(1, True)], bad
    assert f"{path}" in caplog.text and "replaced by line 4" in caplog.text, caplog.text
    (loaded,) = load_runs([run])
    bench = loaded.benchmarks["demo-mc"]
    assert bench.n_bad_lines == 1 and "1 invalid lines left out" in bench.markers, bench.markers


@pytest.mark.parametrize("summary,manifest,shown", [
    ("null", None, False),
    ('{"benchmarks": {"demo-mc": [1, 2]}}', None, False),
    ('{"model": "m", "benchmarks": {"demo-mc": {"results_file": 7, "n_total": "many"}}}', None, False),
    (None, '{"model": ["not", "a", "mapping"], "benchmarks": {"demo-mc": {"config": 3}}}', True),
    (None, '{"hardware": {"gpus": "H200"}}', True),
    (None, "[]", True),
], ids=["summary-null", "block-list", "block-fields", "manifest-model-list", "manifest-gpus", "manifest-list"])
def test_a_wrong_shaped_summary_or_manifest_is_reported_for_its_run_alone(
        clean_run: Path, tmp_path: Path, caplog, summary: str | None, manifest: str | None, shown: bool) -> None:
    import shutil

    good, hostile = tmp_path / "good", tmp_path / "hostile"
    shutil.copytree(clean_run, good)
    shutil.copytree(clean_run, hostile)
    if summary is not None:
        (hostile / "summary.json").write_text(summary)
    if manifest is not None:
        (hostile / "manifest.json").write_text(manifest)
    with caplog.at_level(logging.WARNING):
        site = build_site([good, hostile], tmp_path / "site", frames=False)
    runs = json.loads((site / "data" / "runs.json").read_text())
    assert len(runs) == (2 if shown else 1), runs
    named = "summary.json" if summary is not None else "manifest.json"
    assert f"{hostile}" in caplog.text and named in caplog.text, caplog.text
    if not shown:
        with pytest.raises(UserError, match=str(hostile)):
            load_runs([hostile])
        with pytest.raises(UserError, match="cannot read the run"):
            load_runs([good, hostile], strict=True)  # compare: both runs or a message
