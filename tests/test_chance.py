"""Chance level beside every score: the summary records it per benchmark (1 / options, yes/no 1/2, none for free-form
answers), the table prints it as a column with a note that says what it means, and a random-weight model's table
says why its scores sit near 0. Runs are written by the real result store, line builder, scorers and summary writer."""

from __future__ import annotations

import io
import json

import pytest
from test_leaderboard_runs import make_run, right

from vbench_async.cli.output import print_table
from vbench_async.scoring.chance import chance_level, sample_chance


def _noise(sample, i):
    return "zq xv kk"  # what a random-weight model writes: no answer in it


def test_chance_of_one_question():
    assert sample_chance("multiple choice", ["A. x", "B. y", "C. z", "D. w"]) == 0.25
    assert sample_chance("mc", ["A. x", "B. y"]) == 0.5
    assert sample_chance("yes/no", []) == 0.5
    assert sample_chance("numerical", []) is None and sample_chance("OCR", []) is None
    assert sample_chance("no such type", ["A"]) is None
    lines = [{"task_type": "multiple choice", "options": ["a", "b", "c", "d"]},
             {"task_type": "multiple choice", "options": ["a", "b"]}, {"task_type": "numerical", "options": []}]
    assert chance_level(lines) == pytest.approx((0.25 + 0.5 + 0) / 3)
    assert chance_level([{"task_type": "temporal grounding"}]) is None


def test_summary_and_table_say_what_chance_is_and_why_a_random_model_scores_zero(tmp_path):
    run = make_run(tmp_path / "tiny", "tiny-qwen2.5-vl", _noise, benchmarks=("demo-mc", "demo-yesno", "demo-count"))
    summary = json.loads((run / "summary.json").read_text())
    blocks = summary["benchmarks"]
    assert blocks["demo-mc"]["chance"] == pytest.approx(0.25)  # four options each
    assert blocks["demo-yesno"]["chance"] == pytest.approx(0.5)
    assert "chance" in blocks["demo-count"] and blocks["demo-count"]["chance"] is None  # free-form: a guess gets ~0
    assert summary["random_weights"] is True
    buf = io.StringIO()
    print_table(summary, file=buf)
    text = buf.getvalue()
    header, _, *rows = text.splitlines()
    assert header.split()[4:6] == ["CI", "chance"]
    cells = {r.split()[0]: r.split() for r in rows if r.split() and r.split()[0].startswith("demo-")}
    assert [cells[b][-6] for b in ("demo-mc", "demo-yesno", "demo-count")] == ["25.00", "50.00", "~0"]  # chance
    assert "chance: the score of guessing uniformly" in text
    assert "tiny-qwen2.5-vl has random weights" in text and "expected, not a scorer fault" in text


def test_a_trained_model_gets_no_random_weights_note(tmp_path):
    run = make_run(tmp_path / "m", "my-model", right, benchmarks=("demo-mc",))
    summary = json.loads((run / "summary.json").read_text())
    buf = io.StringIO()
    print_table(summary, file=buf)
    assert "random weights" not in buf.getvalue() and "chance" in buf.getvalue()
