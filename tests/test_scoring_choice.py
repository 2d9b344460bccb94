"""Table-driven tests: multiple choice and yes/no extraction, including the predecessor's failure cases."""

import pytest

from vbench_async.samples import Sample
from vbench_async.scoring import score


def make(task_type, answer, options=(), **fields):
    return Sample("bench", "1", task_type, "q", answer, tuple(options), fields=fields)


MC = make("multiple choice", "<answer>B</answer>", ["A. aldose", "B. ketose", "C. pentose", "D. hexose"])

# (output, value, extracted letter or None)
MC_CASES = [
    ("B", 1.0, "B"),
    ("(B)", 1.0, "B"),
    ("B.", 1.0, "B"),
    ("b", 1.0, "B"),
    ("B. ketose", 1.0, "B"),  # predecessor: letter plus option text was not parsed
    ("B ketose", 1.0, "B"),
    ("ketose", 1.0, "B"),  # the option text alone
    ("The answer is B.", 1.0, "B"),
    ("Therefore, the final answer is: B", 1.0, "B"),
    ("<think>A looks right... no, it is B.</think><answer>B</answer>", 1.0, "B"),
    ("<answer> (B) ketose </answer>", 1.0, "B"),
    ("**B**", 1.0, "B"),
    ("Answer: B", 1.0, "B"),
    ("After watching the video I choose B.", 1.0, "B"),
    ("B because the sugar has a ketone group", 1.0, "B"),
    ("I think B", 1.0, "B"),  # "I" is a pronoun here, not option I
    ("答案是 B", 1.0, "B"),
    ("the answer is a ketose", 1.0, "B"),  # predecessor read the article "a" as option A
    ("The answer is a sugar with a ketone", 0.0, None),  # article, no letter anywhere: malformed, not "A"
    ("A man is holding a sugar cube", 0.0, None),  # leading article
    ("A or B", 0.0, None),  # ambiguous
    ("E", 0.0, "E"),  # not one of the four options: extracted but malformed
    ("The answer is A.", 0.0, "A"),
    ("Let me think. The first option is wrong.\nFinal answer: C", 0.0, "C"),
    ("<answer>A</answer>", 0.0, "A"),
    ("", 0.0, None),
    ("I don't know", 0.0, None),
    ("<answer>B</answer> wait, actually <answer>D</answer>", 0.0, "D"),  # the last answer tag counts
]


@pytest.mark.parametrize("output,value,extracted", MC_CASES)
def test_multiple_choice(output, value, extracted):
    s = score(MC, output)
    assert (s.value, s.extracted) == (value, extracted)
    assert s.well_formed == (extracted is not None and extracted in "ABCD")


@pytest.mark.parametrize(
    "options,answer,output,value",
    [
        (["A: While showing the bow", "B: When shooting"], "<answer>B</answer>", "B: When shooting", 1.0),  # "A: text"
        (None, "<answer>C</answer>", "C", 1.0),  # options: null -> letters A-J
        (["A. 10.0", "B. 5.0"], "<answer>A</answer>", "10.0", 1.0),
        ([f"{c}. option {c}" for c in "ABCDEFGHIJ"], "<answer>J</answer>", "(J)", 1.0),
        (["A. neighbor", "B. colleague", "C. x", "D. y", "E. z", "F. friend"], "<answer>F</answer>", "F. friend", 1.0),
        (["A. Not sure", "B. Scattering"], "B", "The answer is B", 1.0),  # bare-letter ground truth
        (["A. Not sure", "B. Scattering"], "<answer>Scattering</answer>", "B", 1.0),  # option-text ground truth
    ],
)
def test_multiple_choice_option_styles(options, answer, output, value):
    s = score(make("multiple_choice", answer, options or ()), output)
    assert s.value == value and s.well_formed


NO = make("boolean", "<answer>No</answer>")
YES = make("yes/no", "<answer>Yes</answer>")

# (sample, output, value, extracted)
YES_NO_CASES = [
    (NO, "No", 1.0, "no"),
    (NO, "no.", 1.0, "no"),
    (NO, "NO", 1.0, "no"),
    (NO, "N", 1.0, "no"),
    (NO, "<answer>No</answer>", 1.0, "no"),
    (NO, "The answer is no.", 1.0, "no"),
    (NO, "Looking at the last frames, the person is not cutting. So no.", 1.0, "no"),
    (NO, "False", 1.0, "no"),
    (NO, "NOT", 0.0, None),  # predecessor: substring "NO" in "NOT" counted as No
    (NO, "I don't KNOW", 0.0, None),  # ... and in "KNOW"
    (NO, "nobody", 0.0, None),
    (NO, "Yes", 0.0, "yes"),
    (NO, "Yes, no doubt about it", 0.0, "yes"),  # the first word answers
    (YES, "EYES", 0.0, None),  # predecessor: "EYES" contains "YES"
    (YES, "Yes", 1.0, "yes"),
    (YES, "Y", 1.0, "yes"),
    (YES, "true", 1.0, "yes"),
    (YES, "<think>Could be no... the step is visible now.</think>\nYes", 1.0, "yes"),
    (YES, "Therefore, the final answer is: Yes", 1.0, "yes"),
    (YES, "", 0.0, None),
]


@pytest.mark.parametrize("sample,output,value,extracted", YES_NO_CASES)
def test_yes_no(sample, output, value, extracted):
    s = score(sample, output)
    assert (s.value, s.extracted, s.well_formed) == (value, extracted, extracted is not None)


@pytest.mark.parametrize("ovo_type,output,value", [(1, "Yes", 1.0), (0, "No", 1.0), (0, "Yes", 0.0), (1, "No", 0.0)])
def test_ovo_ssr_crr_truth_comes_from_ovo_type(ovo_type, output, value):
    # the solution text says the opposite of ovo_type on purpose: the field is the official truth
    for task in ("SSR", "CRR"):
        sample = make(task, "<answer>Yes</answer>" if ovo_type == 0 else "<answer>No</answer>", ovo_type=ovo_type)
        assert score(sample, output).value == value
