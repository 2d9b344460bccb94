"""Table-driven tests: numerical, regression (MRA) and counting answers."""

import pytest

from vbench_async.samples import Sample
from vbench_async.scoring import mean_relative_accuracy, score


def make(task_type, answer):
    return Sample("bench", "1", task_type, "q", answer)


FIVE = make("numerical", "<answer>5</answer>")
PI = make("numerical", "<answer>3.14</answer>")
BIG = make("numerical", "<answer>1,234</answer>")

# (sample, output, value, well_formed)
NUMERICAL_CASES = [
    (FIVE, "5", 1.0, True),
    (FIVE, "5.0", 1.0, True),  # predecessor: "5" vs "5.0" scored 0 (decimal point on one side only)
    (FIVE, "<answer>5.00</answer>", 1.0, True),
    (FIVE, "five", 1.0, True),
    (FIVE, "The answer is 5 meters.", 1.0, True),
    (FIVE, "Therefore, the final answer is: 5.\nThis follows from 3 + 2 = 5 at 10s.", 1.0, True),  # trailing text
    (FIVE, "\\boxed{5}", 1.0, True),
    (FIVE, "$5$", 1.0, True),
    (FIVE, "6", 0.0, True),
    (FIVE, "4.99", 0.0, True),  # an integer truth needs the integer
    (FIVE, "answer: -5", 0.0, True),
    (FIVE, "about 5,000", 0.0, True),
    (FIVE, "no idea", 0.0, False),
    (FIVE, "", 0.0, False),
    (PI, "3.14159", 1.0, True),  # rounds to the truth's two decimals
    (PI, "3.1", 0.0, True),
    (PI, "3.15", 0.0, True),
    (BIG, "1234", 1.0, True),  # thousands separator
    (BIG, "1,234.0", 1.0, True),
    (BIG, "1.234", 0.0, True),
    (make("numerical", "<answer>0.25</answer>"), "25%", 1.0, True),
    (make("numerical", "<answer>-2</answer>"), "−2", 1.0, True),  # unicode minus
    (make("numerical", "<answer>1/4</answer>"), "0.25", 1.0, True),
]


@pytest.mark.parametrize("sample,output,value,well_formed", NUMERICAL_CASES)
def test_numerical(sample, output, value, well_formed):
    s = score(sample, output)
    assert (s.value, s.well_formed) == (value, well_formed)


FOUR = make("regression", "<answer>4</answer>")

# (output, MRA): the careful reading uses the VSI-Bench paper's MRA, |pred - gt| / gt < 1 - level strictly over
# the 10 levels 0.50..0.95 in exact decimals (the official reading keeps the code's `<=` in floats)
REGRESSION_CASES = [
    ("4", 1.0),
    ("4.0", 1.0),
    ("<answer>4</answer>", 1.0),
    ("four", 1.0),
    ("3.9", 1.0),  # 2.5 % off: inside every threshold
    ("4.2", 0.9),  # 5 % off: not strictly inside 1 - 0.95
    ("5", 0.5),  # 25 % off: thresholds 0.50..0.70 (0.25 < 0.25 fails)
    ("3", 0.5),
    ("3.5", 0.8),  # 12.5 % off
    ("2", 0.0),  # 50 % off: not strictly inside even the 0.50 threshold
    ("8", 0.0),
    ("-4", 0.0),
    ("The room is about 4 meters wide.", 1.0),
    ("Therefore, the final answer is: 4\nIt spans 12 tiles.", 1.0),  # predecessor broke on trailing text
    ("The distance is 4,000 millimeters", 0.0),
    ("nothing", 0.0),
    ("About 4 or 5 meters.", 0.0),  # a hedge gets no credit
]


@pytest.mark.parametrize("output,mra", REGRESSION_CASES)
def test_regression_mra(output, mra):
    s = score(FOUR, output)
    assert s.value == pytest.approx(mra)
    assert s.details["mra"] == pytest.approx(mra)


def test_regression_decimal_truth_and_zero():
    assert score(make("regression", "<answer>1.0</answer>"), "1").value == 1.0
    assert score(make("regression", "<answer>0</answer>"), "0").value == 1.0
    assert score(make("regression", "<answer>0</answer>"), "0.1").value == 0.0


def test_mean_relative_accuracy_helper():
    assert mean_relative_accuracy(10, 10) == 1.0
    assert mean_relative_accuracy(15, 10) == pytest.approx(0.1)
    assert mean_relative_accuracy(100, 10) == 0.0
    assert mean_relative_accuracy(float("nan"), 10) == 0.0


THREE = make("REC", "<answer>3</answer>")


@pytest.mark.parametrize(
    "output,value,well_formed",
    [
        ("3", 1.0, True),
        ("three", 1.0, True),
        ("3.0", 1.0, True),
        ("3 times in 2 rounds", 1.0, True),  # predecessor concatenated digits: "32"
        ("The action is performed 3 times.", 1.0, True),
        ("32", 0.0, True),
        ("3.5", 0.0, False),
        ("twice", 0.0, True),
        ("none", 0.0, True),
        ("unclear", 0.0, False),
    ],
)
def test_counting(output, value, well_formed):
    s = score(THREE, output)
    assert (s.value, s.well_formed) == (value, well_formed)
