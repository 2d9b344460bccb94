"""The robust (careful) grader on the clear cases the official parsers and the previous scorer misgraded (issue 17):
a truncated <think> earns nothing, long answer lines read, the final answer wins over the first, hedges and option
discussions are no answer, and the common span forms parse. Every case here has one right reading."""

from __future__ import annotations

import json

import pytest

from vbench_async.scoring import Reading, reward, score

LONG = "a wooden chair standing in the corner of the room next to the large window with blue curtains"
MC = {"problem": "q", "problem_type": "multiple choice", "options": ["A. a red ball", f"B. {LONG}", "C. a dog"],
      "solution": "<answer>B</answer>"}
MC_A = dict(MC, solution="<answer>A</answer>")
NUM = {"problem": "q", "problem_type": "numerical", "solution": "<answer>12.97</answer>"}
YES = {"problem": "q", "problem_type": "yes/no", "solution": "<answer>Yes</answer>"}
NO = {"problem": "q", "problem_type": "yes/no", "solution": "<answer>No</answer>"}
SPAN = {"problem": "q", "problem_type": "temporal grounding", "solution": json.dumps({"time": [12.5, 20.0]})}

CLEAR_CASES = [
    # a cut-off chain of thought that merely names options
    (MC, "<think>Option A is a ball. Option B is a chair, which seems right. So the answer is B", 0.0),
    (MC_A, "<think>Looking at the video, the answer is A", 0.0),
    (MC, "<think>The chair is in the corner.<answer>B</answer>", 1.0),  # a finished answer tag inside counts
    (MC, "<think>The chair is in the corner.</think>The answer is B.", 1.0),
    # an answer line longer than 80 characters
    (MC, f"B) {LONG}", 1.0),
    (MC, f"Answer: B. {LONG}", 1.0),
    # hedges and discussions are no answer
    (MC, "The answer is B or C.", 0.0),
    (MC, "B or C", 0.0),
    (MC, "Option A shows a ball and option B shows a chair; option C shows a dog.", 0.0),
    (MC, "Comparing (A) with (B) and (C), it is hard to say.", 0.0),
    (MC, "b", 1.0),  # case-insensitive lone letter
    (MC, LONG, 1.0),  # the option text alone
    # the final number / yes-no wins over the first
    (NUM, "First I thought 25.94, but after rechecking it is 12.97", 1.0),
    (NUM, "The total is 12.97 seconds.", 1.0),
    (YES, "No... actually, Yes.", 1.0),
    (NO, "Nope", 1.0),
    (NO, "Not yet", 1.0),
    (NO, "No, there is none.", 1.0),
    (YES, "Yes, although no dog is visible at first.", 1.0),
    # span forms
    (SPAN, "The event starts at 12.5 seconds and ends at 20 seconds.", 1.0),
    (SPAN, "(12.5, 20)", 1.0),
    (SPAN, '{"start": 12.5, "end": 20.0}', 1.0),
    (SPAN, '<answer>{"start_time": 12.5, "end_time": 20}</answer>', 1.0),
    (SPAN, "[20, 12.5]", 1.0),  # inverted: swapped
]


@pytest.mark.parametrize("sample,output,expected", CLEAR_CASES)
def test_robust_grader_on_clear_cases(sample, output, expected):
    s = score(sample, output)
    assert s.value == expected, (output, s)
    assert s.robust == Reading(s.value, s.extracted)


def test_truncated_think_is_malformed_not_a_letter():
    s = score(MC, "<think>Option B looks right, but")
    assert (s.value, s.extracted, s.well_formed) == (0.0, None, False)


def test_reward_uses_the_robust_reading():
    # lmms-eval's Video-MME parser reads letters only: the option text alone scores 0 there, 1 for the robust grader
    sample = dict(MC, solution="<answer>C</answer>")
    s = score(sample, "a dog", protocol="videomme")
    assert s.robust.value == 1.0 and s.official.value == 0.0 and s.differs
    assert reward(sample, "a dog", format_weight=0.0) == 1.0
