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
from . import answer_extraction as extract
from .base import Score, malformed
from .metrics import box_iou, interval_iou
from .tasks import first_answer, ground_truth

Span = tuple[float, float]
Box = tuple[float, float, float, float]

_TIME = r"(?:\d+:)?\d+:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?"
_SPAN_TEXT = re.compile(
    rf"(?<![\d.:])({_TIME})\s*(?:s|sec|secs|seconds?)?\s*(?:-|–|—|~|\bto\b|\buntil\b|\band\b)\s*({_TIME})", re.I
)
_LIST2 = re.compile(r"[\[(]\s*" + r"\s*,\s*".join([f"({extract.NUMBER_PATTERN})"] * 2) + r"\s*[\])]")
_STARTS_ENDS = re.compile(
    rf"\b(?:starts?|begins?|starting|beginning)\b\D{{0,40}}?({_TIME})\s*(?:s|sec|secs|seconds?)?\b"
    rf".{{0,80}}?\b(?:ends?|ending|finish(?:es)?|stops?)\b\D{{0,40}}?({_TIME})",
    re.I | re.S,
)
_START_END_KEYS = (("start", "end"), ("start_time", "end_time"), ("begin", "end"))
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
    """[start, end] as two floats; an inverted span is swapped (as lmms-eval's Charades-STA code does)."""
    nums = extract.number_list(value, 2)
    if nums is None:
        return None
    return min(nums), max(nums)


def _keyed_span(obj: Mapping[str, Any]) -> Span | None:
    """{"start": s, "end": e} (or start_time/end_time, begin/end)."""
    for a, b in _START_END_KEYS:
        if a in obj and b in obj:
            span = to_span([obj[a], obj[b]])
            if span:
                return span
    return None


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
    """[start, end] seconds from {"time": [s, e]}, {"start": s, "end": e}, a bare [s, e] or (s, e), "s to e" /
    "s - e" text, or "starts at s seconds and ends at e seconds"."""
    for obj in reversed(extract.json_objects(text)):
        span = to_span(obj["time"]) if "time" in obj else _keyed_span(obj)
        if span:
            return span
    for pattern, convert in ((_LIST2, float), (_STARTS_ENDS, _seconds), (_SPAN_TEXT, _seconds)):
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


def frame_size(sample: Sample) -> tuple[float, float] | None:
    """The source video's (width, height) when the record gives it (ST-Align's meta.width / meta.height)."""
    try:
        w, h = float(sample.fields.get("width")), float(sample.fields.get("height"))
    except (TypeError, ValueError):
        return None
    return (w, h) if w > 0 and h > 0 else None


def _scaled(boxes: Mapping[str, Box | None], sx: float, sy: float) -> dict[str, Box | None]:
    return {k: (b[0] / sx, b[1] / sy, b[2] / sx, b[3] / sy) if b else None for k, b in boxes.items()}


def in_seen_frame(sample: Sample, gt: dict[str, Box | None], pred: dict[str, Box | None]) -> tuple[dict, dict, str]:
    """Both sides' boxes as fractions of the frame the model saw, when the source size is known: the truth (source
    pixels) divided by it, the prediction read as fractions when every coordinate is <= 1, else as Qwen-VL's 0-1000
    units. Without the size (the unified file) both stay as given."""
    size = frame_size(sample)
    if size is None:
        return gt, pred, "as given (no source frame size in the record)"
    coords = [c for b in pred.values() if b for c in b]
    unit = 1.0 if coords and max(coords) <= 1.0 else 1000.0
    return _scaled(gt, *size), _scaled(pred, unit, unit), f"fractions of the frame (prediction in 0-{unit:g})"


def stvg_parts(sample: Sample, output: str) -> dict[str, Any]:
    """Per-item parts of spatio-temporal grounding in the frame the model saw: tiou, the official ST-Align sIoU and
    vIoU (box IoUs summed over the seconds both sides have, over |both| and over |either|; 0 without boxes) and
    the truth-keyed mean box IoU. `found` is None for an output without a valid span."""
    gt_span, gt_boxes = ground_truth(sample, parse_span_boxes, 'a {"time": [s, e], "boxes": {...}} answer')
    found = first_answer(output, parse_span_boxes)
    expected = sum(box is not None for box in gt_boxes.values())
    parts: dict[str, Any] = {"found": found, "tiou": 0.0, "siou": 0.0, "viou": 0.0, "boxes_expected": expected,
                             "box_iou": 0.0 if expected else None}
    if found is None:
        return parts
    (span, boxes), _ = found
    gt_boxes, boxes, frame = in_seen_frame(sample, gt_boxes, boxes)
    gt_set = {k for k, b in gt_boxes.items() if b is not None}
    pred_set = {k for k, b in boxes.items() if b is not None}
    inter = [box_iou(boxes[k], gt_boxes[k]) for k in gt_set & pred_set]
    parts.update(tiou=interval_iou(span, gt_span), siou=sum(inter) / max(len(inter), 1),
                 viou=sum(inter) / max(len(gt_set | pred_set), 1), box_frame=frame)
    if expected:
        parts["box_iou"], parts["boxes_matched"] = track_iou(boxes, gt_boxes)
    return parts


def llava_st_meta(sample: Sample) -> dict[str, Any] | None:
    """The ST-Align release's own fields of an item (`fields["meta"]`: frame split, frame size, truth span in
    frames and truth boxes by frame), as `official.answers.llava_st_item` takes them; None when absent."""
    meta = sample.fields.get("meta")
    if not isinstance(meta, Mapping):
        return None
    try:
        tokens, boxes = meta["time_token"], meta["boxes_by_frame"]
        return {"split": [int(meta["split"][0]), int(meta["split"][1])], "width": float(meta["width"]),
                "height": float(meta["height"]), "gt_span": [int(tokens["<s>"]), int(tokens["<e>"])],
                "gt_boxes": {str(k): [float(c) for c in b] for k, b in boxes.items()}}
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def stvg_item(sample: Sample, output: str) -> dict[str, Any]:
    parts = stvg_parts(sample, output)
    extracted = None
    if parts["found"] is not None:
        (span, boxes), _ = parts["found"]
        extracted = _fmt({"time": list(span), "boxes": {k: list(b) if b else None for k, b in boxes.items()}})
    return {**parts, "extracted": extracted}


def score_spatial_temporal_grounding(sample: Sample, output: str) -> Score:
    """0.5 tIoU + 0.5 mean box IoU over the ground truth's seconds; tIoU alone when the truth has no boxes. Boxes are
    compared in the frame the model saw (`in_seen_frame`); details carry the official sIoU and vIoU."""
    item = stvg_item(sample, output)
    keep = ("tiou", "siou", "viou", "box_iou", "boxes_expected", "boxes_matched", "box_frame")
    details = {k: item[k] for k in keep if k in item}
    if item["found"] is None:
        meta = llava_st_meta(sample)
        if meta is not None:  # no JSON answer, but perhaps LLaVA-ST's own tokens, readable with the release's fields
            from .official.answers import llava_st_item

            native = llava_st_item(output, **meta)
            if native["n_pred_frames"]:
                details.update(tiou=native["tiou"], siou=native["siou"], viou=native["viou"], source="llava_st")
                return Score(native["viou"], None, True, details)
        return malformed(source=None, **details)
    details["source"] = item["found"][1].source
    value = 0.5 * item["tiou"] + 0.5 * item["box_iou"] if item["boxes_expected"] else item["tiou"]
    return Score(value, item["extracted"], True, details)


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
