"""VCR-Bench (zhishuifeiqian/VCR-Bench `eval_code/eval.py`, `extract_answer` and `match_answer`; prompts in
`eval_code/prompt.py`): two judge steps for every item, multiple choice included.

1. Extraction: the judge reads the question and the whole response and writes the final answer (an option letter,
   a value or phrase, "[s, e]" for a time period, or Z when there is none).
2. Matching: when the truth and the extraction are both time spans, tIoU > 0.7 is correct; both boxes
   ("[x1, y1, x2, y2]", integers), IoU > 0.5; otherwise the judge compares them and replies 1 or 0.

The prompt texts are the protocol itself: the instruction parts are copied verbatim (as Python evaluates the
official literals, so its "\\f" in "\\frac" stays a form feed) into `prompts/vcrbench_*.txt`; the question parts are
below. The question is the record's question with its option lines, as the official files hold it. Differences:
a matching reply other than 1 or 0 is a judge failure here (the official code counts it as 0), and the CoT
precision/recall scores (`cau_total.py`) are not computed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Sequence

from .base import UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, one_or_zero

SOURCE = "zhishuifeiqian/VCR-Bench eval_code/eval.py (extract_answer, match_answer) and eval_code/prompt.py"
_PROMPTS = Path(__file__).with_name("prompts")
EXTRACT_HEAD = (_PROMPTS / "vcrbench_extract.txt").read_text(encoding="utf-8")
SCORE_HEAD = (_PROMPTS / "vcrbench_score.txt").read_text(encoding="utf-8")
EXTRACT_TAIL = "\nQuestion: {question}\nAnswer: {response}\nYour output:\n"
SCORE_TAIL = "\nQuestion: {question}\n[Model Answer]: {extract_answer}\n[Standard Answer]: {gt_answer}\nYour output:\n"


def extract_prompt(question: str, response: str) -> str:
    return EXTRACT_HEAD + EXTRACT_TAIL.format(question=question, response=response)


def score_prompt(question: str, extracted: str, truth: str) -> str:
    return SCORE_HEAD + SCORE_TAIL.format(question=question, extract_answer=extracted, gt_answer=truth)


def time_span(text: str) -> list[float] | None:
    """`is_valid_time_interval`: a Python literal list of two numbers."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    return [float(x) for x in value] if ok else None


def box(text: str) -> list[int] | None:
    """`is_valid_space_interval`: "[a, b, c, d]" with four integers."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    parts = text[1:-1].split(",")
    try:
        return [int(p.strip()) for p in parts] if len(parts) == 4 else None
    except ValueError:
        return None


def match_by_rule(truth: str, extracted: str) -> tuple[bool, str] | None:
    """The official geometric matches; None when the judge must compare the two texts."""
    gs, ps = time_span(truth), time_span(extracted)
    if gs is not None and ps is not None:
        return _official_tiou(gs, ps) > 0.7, "tIoU > 0.7"
    gb, pb = box(truth), box(extracted)
    if gb is not None and pb is not None:
        return _official_box_iou(gb, pb) > 0.5, "IoU > 0.5"
    return None


def _official_tiou(a: list[float], b: list[float]) -> float:
    """`calculate_time_iou`: no swap of an inverted span; a zero union scores 0."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union else 0.0


def _official_box_iou(a: list[int], b: list[int]) -> float:
    """`calculate_space_iou`; a zero union (the official code raises, and scores the item 0) is 0."""
    w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    if w < 0 or h < 0:
        return 0.0
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union if union else 0.0


class VCRBenchJudge(JudgeProtocol):
    name = "vcrbench"
    source = SOURCE
    templates = {"extract": EXTRACT_HEAD + EXTRACT_TAIL, "score": SCORE_HEAD + SCORE_TAIL}

    def start(self, item: JudgeItem) -> list[Ask]:
        return [Ask("extract", extract_prompt(item.question_with_options(), item.output), max_tokens=256)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> list[Ask] | Outcome:
        if asks[0].stage == "extract":
            extracted = replies[0].strip()
            ruled = match_by_rule(item.reference, extracted)
            if ruled is not None:
                return Outcome.of(ruled[0], extracted=extracted[:200], rule=ruled[1])
            return [Ask("score", score_prompt(item.question_with_options(), extracted, item.reference),
                        max_tokens=8, context={"extracted": extracted[:200]})]
        verdict = one_or_zero(replies[0])
        if verdict is None:
            return Outcome.failed(UNPARSABLE, "no 1/0 verdict", reply=replies[0][:200], **asks[0].context)
        return Outcome.of(verdict, rule="judge match", **asks[0].context)
