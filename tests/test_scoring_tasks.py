"""OCR, math, open-ended, code and preference scorers; routing, records as input, and the RL reward."""

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vbench_async.errors import SampleError
from vbench_async.samples import Sample
from vbench_async.scoring import (
    Reading,
    UnknownTaskType,
    canonical_task_type,
    check_sample,
    known_task_types,
    reward,
    reward_parts,
    score,
)
from vbench_async.scoring.math_task import equivalent

ROOT = Path(__file__).resolve().parents[1]


def make(task_type, answer, options=(), **fields):
    return Sample("bench", "1", task_type, "q", answer, tuple(options), fields=fields)


# ------------------------------------------------------------------------------------------------- OCR

OCR = make("ocr", "<answer>EXIT 12 NORTH</answer>")


@pytest.mark.parametrize(
    "output,value",
    [
        ("EXIT 12 NORTH", 1.0),
        ("exit 12 north", 1.0),  # case-insensitive
        ('The sign reads "EXIT 12 NORTH".', 1.0),  # quoted text in a sentence
        ("EXIT 12", 2 / 3),  # one deleted word of three
        ("EXIT 21 NORTH", 2 / 3),
        ("something else entirely here today", 0.0),  # WER > 1 clips to 0
    ],
)
def test_ocr(output, value):
    s = score(OCR, output)
    assert s.value == pytest.approx(value)
    assert 0.0 <= s.details["anls"] <= 1.0


def test_ocr_anls():
    s = score(OCR, "EXIT 12 NORTE")
    assert s.details["anls"] == pytest.approx(1 - 1 / 13)


# ------------------------------------------------------------------------------------------------ math

HALF = make("math", "<answer>\\frac{1}{2}</answer>")


@pytest.mark.parametrize(
    "output,value,well_formed",
    [
        ("0.5", 1.0, True),
        ("1/2", 1.0, True),
        ("\\boxed{\\frac{2}{4}}", 1.0, True),
        ("The answer is $\\frac{1}{2}$", 1.0, True),
        ("0.6", 0.0, True),
        ("hello", 0.0, False),
    ],
)
def test_math(output, value, well_formed):
    s = score(HALF, output)
    assert (s.value, s.well_formed) == (value, well_formed)


def test_math_symbolic_equivalence():
    assert score(make("math", "<answer>x^2+2x+1</answer>"), "$(x+1)^2$").value == 1.0


def test_math_with_options_is_multiple_choice():
    sample = make("math", "<answer>C</answer>", ["A. 1", "B. 2", "C. 3"])
    assert score(sample, "The answer is C").value == 1.0


def test_math_has_a_time_limit():
    # math-verify's own alarm is not enough: sympy can swallow it and integrate for minutes (seen under load).
    start = time.monotonic()
    parsed, equal, _ = equivalent("1", "\\int_0^1 e^{x^{7}}\\sin(x^{9}) dx", limit=1)
    assert time.monotonic() - start < 15
    assert parsed and not equal


def test_math_off_the_main_thread():
    # math-verify's SIGALRM timer only works in the main thread; other threads use a worker process
    with ThreadPoolExecutor(1) as pool:
        results = list(pool.map(lambda o: score(HALF, o), ["0.5", "0.7"]))
    assert [r.value for r in results] == [1.0, 0.0]


def test_math_works_from_a_script_read_on_standard_input():
    # multiprocessing's spawn re-runs the caller's main script in the worker: from stdin (or a notebook) that failed,
    # the worker never started and every symbolic check "timed out" and scored 0 after 20 s.
    script = ("from vbench_async.scoring.math_task import equivalent\n"
              "print(equivalent('x^2+2x+1', '(x+1)^2'), equivalent('\\\\frac{1}{2}', '0.6'))\n")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120,
                         cwd=tempfile.gettempdir(), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "(True, True, False) (True, False, False)"
    assert time.monotonic() - start < 60


def test_math_worker_that_cannot_start_is_an_error_not_a_zero(monkeypatch):
    from vbench_async.scoring import math_task

    math_task._reset_worker()
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the interpreter the worker would run
    with pytest.raises(math_task.MathCheckUnavailable, match="not checked"):
        score(make("math", "<answer>x^2+2x+1</answer>"), "$(x+1)^2$")
    monkeypatch.undo()
    assert score(make("math", "<answer>x^2+2x+1</answer>"), "$(x+1)^2$").value == 1.0  # a fresh worker after


# ------------------------------------------------------------------------------------------- open-ended


def test_open_ended_falls_back_to_rouge_and_asks_for_a_judge():
    sample = make("open-ended", "<answer>Dolly Zoom</answer>")
    exact = score(sample, "Therefore, the final answer is: dolly zoom")
    assert exact.value == 1.0 and exact.details == {"source": "phrase", "needs_judge": True, "rouge_l": 1.0}
    partial = score(sample, "It is a dolly shot")
    assert 0.0 < partial.value < 1.0 and partial.details["needs_judge"]
    assert score(sample, "").details["needs_judge"]


def test_open_ended_multiline_answer():
    sample = make("open-ended", "<answer>1st: Queen of Clubs\n2nd: Ace of Hearts</answer>")
    assert score(sample, "Final Answer:\n1st: Queen of Clubs\n2nd: Ace of Hearts").value == 1.0


def test_caption_is_open_ended():
    assert canonical_task_type("caption") == "open-ended"


# ------------------------------------------------------------------------------------------------ code

PY = make("code", "<answer>def add(a, b):\n    return a + b</answer>")


def test_code_python_static_checks_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert score(PY, "```python\ndef add(a, b):\n    return a + b\n```").value == 1.0
    assert 0.5 < score(PY, "def add(x, y): return x + y").value < 1.0
    bad = score(PY, "def add(:")
    assert (bad.value, bad.well_formed) == (0.0, False)
    # code that would write a file if executed: it must only be parsed
    hostile = "```python\nopen('pwned', 'w').write('x')\ndef add(a, b):\n    return a + b\n```"
    assert score(PY, hostile).well_formed
    assert not (tmp_path / "pwned").exists()


def test_code_svg_and_html():
    svg = make("svg-code", '<answer><svg width="10"><rect x="1"/></svg></answer>')
    assert score(svg, '<svg width="10"><rect x="1"/></svg>').value == 1.0
    assert 0.0 < score(svg, "<svg><circle/></svg>").value < 1.0
    assert not score(svg, "no svg here").well_formed
    html = make("html-code", "<answer><div><p>hi</p></div></answer>")
    assert score(html, "<div><p>hi</p></div>").value == 1.0


# ------------------------------------------------------------------------------------------ preference


@pytest.mark.parametrize(
    "output,value",
    [
        ("Response 2", 1.0),
        ("2", 1.0),
        ("B", 1.0),
        ("second", 1.0),
        ("<answer>Response 2</answer>", 1.0),
        ("Response 2 is better than Response 1", 1.0),
        ("Response 1", 0.0),
        ("Tie", 0.0),
        ("unsure", 0.0),
    ],
)
def test_preference_labels(output, value):
    assert score(make("critic", "<answer>Response 2</answer>"), output).value == value


def test_preference_tie():
    assert score(make("llava", "Tie"), "They are equally good: tie.").value == 1.0


# -------------------------------------------------------------------------------------------- routing


@pytest.mark.parametrize(
    "spelling,canonical",
    [
        ("multiple choice", "multiple choice"),
        ("Multiple_Choice", "multiple choice"),
        ("multiple-choice", "multiple choice"),
        ("numerical", "numerical"),
        ("regression", "regression"),
        ("REC", "counting"),
        ("SSR", "boolean"),
        ("crr", "boolean"),
        ("binary classification", "boolean"),
        ("temporal grounding", "temporal grounding"),
        ("spatial-temporal grounding", "spatial-temporal grounding"),
        ("spatio_temporal grounding", "spatial-temporal grounding"),
        ("open_ended", "open-ended"),
        ("free-form", "open-ended"),
        ("OCR", "ocr"),
        ("html-code", "code"),
        ("llava", "preference"),
    ],
)
def test_aliases(spelling, canonical):
    assert canonical_task_type(spelling) == canonical


def test_unknown_task_type_lists_the_known_ones():
    with pytest.raises(UnknownTaskType) as exc:
        score(make("interpretive dance", "<answer>A</answer>"), "A")
    assert isinstance(exc.value, ValueError)
    for name in known_task_types():
        assert name in str(exc.value)


def test_every_known_type_routes_to_itself():
    assert all(canonical_task_type(t) == t for t in known_task_types())


def test_record_mapping_is_accepted():
    record = {"problem": "q", "problem_type": "multiple choice", "options": None, "solution": "<answer>C</answer>"}
    s = score(record, "C")
    assert (s.value, s.extracted, s.well_formed, s.details) == (1.0, "C", True, {"source": "text"})
    assert s.robust == Reading(1.0, "C") and s.official is None  # no protocol asked for


def test_unreadable_ground_truth_is_a_sample_error():
    with pytest.raises(SampleError) as exc:
        score(make("numerical", "<answer>many</answer>"), "5")
    assert exc.value.kind == "record_invalid"
    with pytest.raises(SampleError):
        check_sample(make("temporal grounding", "<answer>soon</answer>"))
    with pytest.raises(SampleError):
        check_sample(make("multiple choice", "<answer>E</answer>", ["A. x", "B. y"]))
    assert check_sample(make("numerical", "<answer>5</answer>")).task_type == "numerical"


def test_non_string_output_is_malformed_not_an_error():
    s = score(make("numerical", "<answer>5</answer>"), None)
    assert (s.value, s.well_formed) == (0.0, False)


def test_scores_are_json_serialisable():
    s = score(make("spatial-temporal grounding", '{"time": [0, 1], "boxes": {"0": [0, 0, 1, 1]}}'), "junk")
    assert json.loads(json.dumps(s.to_dict()))["well_formed"] is False


# --------------------------------------------------------------------------------------------- reward

MC = make("multiple choice", "<answer>B</answer>", ["A. x", "B. y"])


@pytest.mark.parametrize(
    "output,accuracy,fmt",
    [
        ("<answer>B</answer>", 1.0, 1.0),
        ("<think>hmm</think><answer>B</answer>", 1.0, 1.0),
        ("<answer>A</answer>", 0.0, 1.0),  # well-formed but wrong
        ("B", 1.0, 0.0),  # right but no tag
        ("<answer>no idea</answer>", 0.0, 0.5),  # tag with an invalid answer
        ("", 0.0, 0.0),
    ],
)
def test_reward_parts(output, accuracy, fmt):
    parts = reward_parts(MC, output)
    assert (parts["accuracy"], parts["format"]) == (accuracy, fmt)
    assert parts["overall"] == pytest.approx(0.9 * accuracy + 0.1 * fmt)
    assert reward(MC, output) == pytest.approx(parts["overall"])


def test_reward_is_configurable():
    assert reward(MC, "B", format_weight=0.0) == 1.0
    assert reward(MC, "<answer>B</answer>", format_weight=0.5, accuracy_weight=1.0) == 1.5
    assert reward(MC, "B", format_weight=0.2, format_mode="well_formed") == pytest.approx(1.0)
    with pytest.raises(ValueError):
        reward(MC, "B", format_mode="xml")
    with pytest.raises(ValueError):
        reward(MC, "B", format_weight=-1)


def test_reward_uses_the_same_score():
    sample = make("temporal grounding", '<answer>{"time": [0, 10]}</answer>')
    output = '<answer>{"time": [5, 10]}</answer>'
    assert reward_parts(sample, output)["accuracy"] == score(sample, output).value == 0.5
