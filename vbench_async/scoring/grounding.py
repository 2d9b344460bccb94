"""Scorers for the JSON grounding task types: temporal, spatial, spatio-temporal grounding and tracking.

Answers are JSON objects: {"time": [s, e]} (seconds), {"boxes": [x1, y1, x2, y2]}, {"time": [s, e], "boxes":
{"<second>": [x1, y1, x2, y2], ...}}, {"boxes": {"<second>": [...], ...}}. They are read from the answer tag, a
```json fence, anywhere in the text, or (as for the Charades-STA ground truth) from inside `<think>`. Temporal
spans also parse from a bare [s, e] list or from text such as "from 12.3 to 25.7 seconds" or "0:12 - 0:25".

Per-second box dicts are scored over the ground truth's keys: a missing or invalid predicted box counts as IoU 0.
Coordinates are compared as given; they must share the ground truth's convention (see docs/scoring.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..samples import Sample
from . import extract
from .base import Score, malformed
from .metrics import box_iou, interval_iou
from .tasks import first_answer, ground_truth

Span = tuple[float, float]
Box = tuple[float, float, float, float]

_TIME = r"(?:\d+:)?\d+:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?"
_SPAN_TEXT = re.compile(
    rf"(?<![\d.:])({_TIME})\s*(?:s|sec|secs|seconds?)?\s*(?:-|–|—|~|\bto\b|\buntil\b|\band\b)\s*({_TIME})", re.I
)
_LIST2 = re.compile(r"\[\s*" + r"\s*,\s*".join([f"({extract.NUMBER_PATTERN})"] * 2) + r"\s*\]")
_LIST4 = re.compile(r"\[\s*" + r"\s*,\s*".join([f"({extract.NUMBER_PATTERN})"] * 4) + r"\s*\]")
_BOX_KEYS = ("boxes", "bbox_2d", "bbox", "box")


def _seconds(token: str) -> float | None:
    """ "12.5" or "1:02.5" / "1:00:02" (clock time) as seconds."""
    try:
        parts = [float(p) for p in token.split(":")]
    except ValueError:
        return None
    value = 0.0
    for p in parts:
        value = value * 60 + p
    return value


def to_span(value: Any) -> Span | None:
    nums = extract.number_list(value, 2)
    if nums is None or nums[1] < nums[0]:
        return None
    return nums[0], nums[1]


def to_box(value: Any) -> Box | None:
    nums = extract.number_list(value, 4)
    if nums is None or nums[2] < nums[0] or nums[3] < nums[1]:
        return None
    return nums[0], nums[1], nums[2], nums[3]


def _second_key(key: Any) -> str | None:
    """Box-dict keys name seconds: "18", 18, "18.0" are the same key."""
    number = extract.to_number(str(key))
    if number is None:
        return None
    return str(int(number.value)) if number.value.is_integer() else f"{number.value:g}"


def to_box_track(value: Any) -> dict[str, Box | None] | None:
    """{"<second>": box} with normalised keys; an invalid box is kept as None (it scores 0 on that key)."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Box | None] = {}
    for k, v in value.items():
        key = _second_key(k)
        if key is not None:
            out[key] = to_box(v)
    return out


def _objects_with(text: str, key: str) -> list[dict]:
    return [o for o in extract.json_objects(text) if key in o]


# ------------------------------------------------------------------------------------------------ parsers


def parse_span(text: str, whole: bool = False) -> Span | None:
    """[start, end] seconds from {"time": [s, e]}, a bare [s, e], or "s to e" / "s - e" text."""
    for obj in reversed(_objects_with(text, "time")):
        span = to_span(obj["time"])
        if span:
            return span
    for pattern, convert in ((_LIST2, float), (_SPAN_TEXT, _seconds)):
        for m in reversed(list(pattern.finditer(text))):
            try:
                span = to_span([convert(m.group(1).replace("−", "-")), convert(m.group(2).replace("−", "-"))])
            except (ValueError, OverflowError):
                span = None
            if span:
                return span
    return None


def parse_box(text: str, whole: bool = False) -> Box | None:
    """[x1, y1, x2, y2] from {"boxes": [...]} (or "bbox_2d", "bbox", "box"), or a bare 4-number list."""
    for obj in reversed(extract.json_objects(text)):
        for key in _BOX_KEYS:
            box = to_box(obj.get(key))
            if box:
                return box
    for m in reversed(list(_LIST4.finditer(text))):
        box = to_box([m.group(i) for i in range(1, 5)])
        if box:
            return box
    return None


def parse_span_boxes(text: str, whole: bool = False) -> tuple[Span, dict[str, Box | None]] | None:
    """{"time": [s, e], "boxes": {...}}: the span must be valid; missing or non-dict boxes read as {}."""
    for obj in reversed(_objects_with(text, "time")):
        span = to_span(obj["time"])
        if span:
            return span, to_box_track(obj.get("boxes")) or {}
    return None


def parse_track(text: str, whole: bool = False) -> dict[str, Box | None] | None:
    for obj in reversed(_objects_with(text, "boxes")):
        track = to_box_track(obj["boxes"])
        if track is not None:
            return track
    return None


def track_iou(pred: Mapping[str, Box | None], gt: Mapping[str, Box | None]) -> tuple[float, int]:
    """Mean box IoU over the ground truth's keys (missing/invalid predicted boxes give 0), and how many matched."""
    keys = [k for k, box in gt.items() if box is not None]
    if not keys:
        return 0.0, 0
    ious, matched = [], 0
    for k in keys:
        box = pred.get(k)
        if box is not None:
            matched += 1
            ious.append(box_iou(box, gt[k]))
        else:
            ious.append(0.0)
    return sum(ious) / len(ious), matched


# ------------------------------------------------------------------------------------------------ scorers


def _fmt(values: Any) -> str:
    return json.dumps(values)


def score_temporal_grounding(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, parse_span, 'a {"time": [start, end]} span')
    found = first_answer(output, parse_span)
    if found is None:
        return malformed(source=None, tiou=0.0)
    span, cand = found
    tiou = interval_iou(span, gt)
    return Score(tiou, _fmt(list(span)), True, {"source": cand.source, "tiou": tiou})


def score_spatial_grounding(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, parse_box, "an [x1, y1, x2, y2] box")
    found = first_answer(output, parse_box)
    if found is None:
        return malformed(source=None, box_iou=0.0)
    box, cand = found
    iou = box_iou(box, gt)
    return Score(iou, _fmt(list(box)), True, {"source": cand.source, "box_iou": iou})


def score_spatial_temporal_grounding(sample: Sample, output: str) -> Score:
    """0.5 tIoU + 0.5 mean box IoU over the ground truth's seconds; tIoU alone when the truth has no boxes."""
    gt_span, gt_boxes = ground_truth(sample, parse_span_boxes, 'a {"time": [s, e], "boxes": {...}} answer')
    expected = sum(box is not None for box in gt_boxes.values())
    found = first_answer(output, parse_span_boxes)
    if found is None:
        return malformed(source=None, tiou=0.0, box_iou=0.0 if expected else None, boxes_expected=expected)
    (span, boxes), cand = found
    tiou = interval_iou(span, gt_span)
    details = {"source": cand.source, "tiou": tiou, "box_iou": None, "boxes_expected": expected}
    value = tiou
    if expected:
        biou, matched = track_iou(boxes, gt_boxes)
        details.update(box_iou=biou, boxes_matched=matched)
        value = 0.5 * tiou + 0.5 * biou
    extracted = {"time": list(span), "boxes": {k: list(b) if b else None for k, b in boxes.items()}}
    return Score(value, _fmt(extracted), True, details)


def score_tracking(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, parse_track, 'a {"boxes": {"<second>": box}} answer')
    expected = sum(box is not None for box in gt.values())
    found = first_answer(output, parse_track)
    if found is None:
        return malformed(source=None, box_iou=0.0, boxes_expected=expected)
    track, cand = found
    biou, matched = track_iou(track, gt)
    extracted = {k: list(b) if b else None for k, b in track.items()}
    return Score(
        biou,
        _fmt(extracted),
        True,
        {"source": cand.source, "box_iou": biou, "boxes_matched": matched, "boxes_expected": expected},
    )
