"""Every record of ../shared/reference-annotations scores 1.0 with its own ground truth as the output, and
below 1.0 with a wrong answer of the same type.

No task type there is skipped: the open-ended and caption records (judge-scored officially) are checked against
their automatic ROUGE-L fallback. See docs/scoring.md.
"""

import json
from pathlib import Path

import pytest

from vbench_async.samples import Sample, iter_samples, read_records
from vbench_async.scoring import canonical_task_type, score

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference-annotations"
FILES = sorted(REFERENCE.glob("*.json*")) if REFERENCE.is_dir() else []


def samples():
    out = []
    for path in FILES:
        for item in iter_samples(read_records(path), path.stem):
            assert isinstance(item, Sample), f"{path.name}: {item}"
            out.append(pytest.param(item, id=item.key))
    return out


def wrong_answer(sample: Sample, truth: str) -> str:
    """An answer of the right form that is wrong, built from the parsed truth (`Score.extracted`)."""
    task = canonical_task_type(sample.task_type)
    if task == "multiple choice":
        letters = sample.option_letters or list("ABCDEFGHIJ")
        others = [c for c in letters if c != truth] or [chr(ord(truth) + 1)]
        return f"<answer>{others[0]}</answer>"
    if task in ("numerical", "regression", "counting"):
        return f"<answer>{float(truth.replace(',', '')) * 3 + 7:g}</answer>"
    if task == "boolean":
        return "<answer>No</answer>" if truth == "yes" else "<answer>Yes</answer>"
    if task == "temporal grounding":
        _, end = json.loads(truth)
        return json.dumps({"time": [end + 100, end + 200]})
    if task == "spatial-temporal grounding":
        parsed = json.loads(truth)
        end = parsed["time"][1]
        far = {k: [b[0] + 5000, b[1] + 5000, b[2] + 5000, b[3] + 5000] for k, b in parsed["boxes"].items() if b}
        return json.dumps({"time": [end + 100, end + 200], "boxes": far})
    if task == "open-ended":
        return "<answer>zebra quartz fjord</answer>"
    raise AssertionError(f"no wrong answer defined for {task}: add one when such records appear")


def test_reference_annotations_are_present():
    if not FILES:
        pytest.skip(f"{REFERENCE} not found")
    assert samples()


@pytest.mark.parametrize("sample", samples())
def test_ground_truth_scores_one_and_a_wrong_answer_less(sample):
    # Charades-STA's truths sit inside <think>, which is read for truths only: as an output, unwrap it.
    own = score(sample, sample.answer.replace("<think>", "").replace("</think>", ""))
    assert own.value == 1.0 and own.well_formed, own
    wrong = score(sample, wrong_answer(sample, own.extracted))
    assert wrong.value < 1.0, wrong
