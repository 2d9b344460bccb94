"""Table-driven tests: temporal, spatial and spatio-temporal grounding, tracking, and recall at IoU."""

import json

import pytest

from vbench_async.samples import Sample
from vbench_async.scoring import recall_at_iou, score


def make(task_type, answer):
    return Sample("bench", "1", task_type, "q", answer)


# The Charades-STA ground truth as shipped: JSON inside <think>, then a junk placeholder token, no <answer>.
CHARADES = make(
    "temporal grounding",
    '<think>{"time": [10.0, 20.0], "boxes": {}}</think><[PLHD21_never_used_51bce0c785ca2f68081bfa7d91973934]>',
)

# (output, tIoU, well_formed)
TEMPORAL_CASES = [
    ('<answer>{"time": [10.0, 20.0]}</answer>', 1.0, True),
    ('{"time": [10, 20]}', 1.0, True),
    ('```json\n{"time": [10, 20]}\n```', 1.0, True),
    ("<answer>{'time': [10, 20]}</answer>", 1.0, True),  # Python-style quotes
    ('<answer>{"time": ["10", "20"]}</answer>', 1.0, True),  # numbers as strings
    ('<answer>{"time": [15, 25]}</answer>', 5 / 15, True),
    ('<answer>{"time": [12, 18]}</answer>', 0.6, True),
    ('<answer>{"time": [0, 10]}</answer>', 0.0, True),  # touching, no overlap
    ('<answer>{"time": [30, 40]}</answer>', 0.0, True),
    ("The event happens from 10 to 20 seconds.", 1.0, True),
    ("between 10s and 20s", 1.0, True),
    ("0:10 - 0:20", 1.0, True),  # clock times
    ("[10, 20]", 1.0, True),
    ('<think>maybe {"time": [0, 5]}</think><answer>{"time": [10, 20]}</answer>', 1.0, True),
    ('<answer>{"time": [20, 10]}</answer>', 1.0, True),  # end before start: swapped, as lmms-eval does
    ('<answer>{"time": [10]}</answer>', 0.0, False),
    ('<answer>{"time": [10, 20</answer>', 0.0, False),  # truncated JSON
    ('<answer>{"time": [true, 20]}</answer>', 0.0, False),
    ("I could not find the event.", 0.0, False),
    ("", 0.0, False),
]


@pytest.mark.parametrize("output,tiou,well_formed", TEMPORAL_CASES)
def test_temporal_grounding(output, tiou, well_formed):
    s = score(CHARADES, output)
    assert s.value == pytest.approx(tiou)
    assert s.details["tiou"] == pytest.approx(tiou)
    assert s.well_formed == well_formed


def test_charades_ground_truth_as_output_scores_one():
    # The truth sits inside <think> (a data quirk it is read through); a model's answer must stand outside it.
    assert score(CHARADES, CHARADES.answer.replace("<think>", "").replace("</think>", "")).value == 1.0
    assert score(CHARADES, CHARADES.answer).value == 0.0


ST = make(
    "spatial-temporal grounding",
    '<answer>{"time": [0.0, 2.0], "boxes": {"0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2": [0, 0, 20, 20]}}</answer>',
)
ST_NO_BOXES = make("spatial-temporal grounding", '<answer>{"time": [0.0, 2.0], "boxes": {}}</answer>')
BOXES = {"0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2": [0, 0, 20, 20]}


def st(time, boxes=None, wrap=True):
    obj = {"time": time} if boxes is None else {"time": time, "boxes": boxes}
    text = json.dumps(obj)
    return f"<answer>{text}</answer>" if wrap else text


# (sample, output, value, well_formed)
ST_CASES = [
    (ST, st([0, 2], BOXES), 1.0, True),
    (ST, st([0, 2], BOXES, wrap=False), 1.0, True),
    (ST, st([0, 2], {"0.0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2.0": [0, 0, 20, 20]}), 1.0, True),  # key spelling
    (ST, st([0, 2], {**BOXES, "3": [5, 5, 6, 6]}), 1.0, True),  # extra seconds are ignored
    # predecessor: one correct key among three scored full box mIoU; here the two missing boxes count as 0
    (ST, st([0, 2], {"0": [0, 0, 10, 10]}), 0.5 + 0.5 / 3, True),
    (ST, st([0, 2]), 0.5, True),  # no boxes at all: box IoU 0
    (ST, st([0, 2], {}), 0.5, True),
    (ST, st([0, 2], [0, 0, 10, 10]), 0.5, True),  # boxes not keyed by second: none match
    (ST, st([0, 2], {"0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2": [20, 20, 0, 0]}), 0.5 + 0.5 * 2 / 3, True),
    (ST, st([0, 2], {"0": [0, 0, 5, 10], "1": [10, 10, 20, 20], "2": [0, 0, 20, 20]}), 0.5 + 0.5 * (0.5 + 2) / 3, True),
    (ST, st([1, 2], BOXES), 0.5 * 0.5 + 0.5, True),
    (ST, st([5, 9], BOXES), 0.5, True),  # wrong time, right boxes
    (ST, st([5, 9], {}), 0.0, True),
    (ST, '{"boxes": {"0": [0, 0, 10, 10]}}', 0.0, False),  # no time span
    (ST, st([2, 0], BOXES), 1.0, True),  # inverted span: swapped
    (ST, "the man on the left", 0.0, False),
    (ST_NO_BOXES, st([0, 2]), 1.0, True),  # truth without boxes: tIoU alone
    (ST_NO_BOXES, st([0, 1], {"0": [1, 2, 3, 4]}), 0.5, True),
]


@pytest.mark.parametrize("sample,output,value,well_formed", ST_CASES)
def test_spatial_temporal_grounding(sample, output, value, well_formed):
    s = score(sample, output)
    assert s.value == pytest.approx(value)
    assert s.well_formed == well_formed


def test_spatial_temporal_details_report_parts():
    s = score(ST, st([1, 2], {"0": [0, 0, 10, 10]}))
    assert s.details["tiou"] == pytest.approx(0.5)
    assert s.details["box_iou"] == pytest.approx(1 / 3)
    assert (s.details["boxes_matched"], s.details["boxes_expected"]) == (1, 3)
    json.dumps(s.to_dict())


SPATIAL = make("spatial grounding", '<answer>{"boxes": [0, 0, 10, 10]}</answer>')


@pytest.mark.parametrize(
    "output,value,well_formed",
    [
        ('{"boxes": [0, 0, 10, 10]}', 1.0, True),
        ('[{"bbox_2d": [0, 0, 10, 10], "label": "dog"}]', 1.0, True),  # Qwen-VL's native format
        ("[0, 0, 10, 10]", 1.0, True),
        ('{"boxes": [0, 0, 5, 10]}', 0.5, True),
        ('{"boxes": [20, 20, 30, 30]}', 0.0, True),
        ('{"boxes": [10, 10, 0, 0]}', 0.0, False),
        ('{"boxes": [0, 0, 10]}', 0.0, False),
    ],
)
def test_spatial_grounding(output, value, well_formed):
    s = score(SPATIAL, output)
    assert (s.value, s.well_formed) == (pytest.approx(value), well_formed)


TRACK = make("tracking", '<answer>{"boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10]}}</answer>')


@pytest.mark.parametrize(
    "output,value",
    [
        ('{"boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10]}}', 1.0),
        ('{"boxes": {"0": [0, 0, 10, 10]}}', 0.5),  # a missing second counts as 0
        ('{"boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10], "7": [1, 1, 2, 2]}}', 1.0),
        ('{"boxes": {}}', 0.0),
    ],
)
def test_tracking(output, value):
    assert score(TRACK, output).value == pytest.approx(value)


def test_recall_at_iou():
    r = recall_at_iou([0.0, 0.3, 0.5, 0.69, 0.7, 1.0])
    assert r == {"R@0.3": pytest.approx(5 / 6), "R@0.5": pytest.approx(4 / 6), "R@0.7": pytest.approx(2 / 6)}
    assert recall_at_iou([0.4], thresholds=(0.1, 0.9)) == {"R@0.1": 1.0, "R@0.9": 0.0}
    with pytest.raises(ValueError):
        recall_at_iou([])
