"""One scorer per answer-style task type: choice, numbers, yes/no, OCR, open-ended, preference labels.

Every scorer has the signature `(sample, output) -> Score`. The ground truth goes through the same extraction
as the output (`ground_truth`), so "<answer>B</answer>", "B" and "B. ketose" are all read alike; a ground truth
that cannot be read raises SampleError("record_invalid"), while a bad output only scores 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..errors import SampleError
from ..failure_kinds import FailureKind
from ..samples import Sample
from . import answer_extraction as extract
from .base import Score, clip01, malformed
from .letters import parse_choice
from .metrics import anls, paper_mra, rouge_l, word_error_rate

Parser = Callable[[str, bool], Any]  # (candidate text, is it the whole output?) -> answer, or None if not one

_WHOLE = ("text", "think")


def first_answer(
    output: str, parse: Parser, multiline: bool = False, think: bool = False
) -> tuple[Any, extract.Candidate] | None:
    """The first candidate (most explicit first) that `parse` accepts, with the parsed answer. Thinking blocks are
    read only with `think` (ground truths such as Charades-STA's sit there; a model's answer hidden inside its
    thinking is no answer)."""
    for cand in extract.candidates(output, multiline, think):
        value = parse(cand.text, cand.source in _WHOLE)
        if value is not None:
            return value, cand
    return None


def ground_truth(sample: Sample, parse: Parser, what: str, multiline: bool = False) -> Any:
    """Parse the sample's ground truth with the same steps as outputs; raise SampleError if it is unreadable."""
    found = first_answer(sample.answer, parse, multiline, think=True)
    if found is None:
        raise SampleError(FailureKind.RECORD_INVALID,
                          f"{sample.key}: ground truth {sample.answer[:80]!r} is not {what}")
    return found[0]


# ---------------------------------------------------------------------------------------- multiple choice


def valid_letters(sample: Sample) -> list[str]:
    return sample.option_letters or list("ABCDEFGHIJ")


def score_multiple_choice(sample: Sample, output: str) -> Score:
    letters = valid_letters(sample)

    def parse(text: str, whole: bool) -> str | None:
        return parse_choice(text, letters, sample.options, whole)

    gt = ground_truth(sample, parse, "an option letter")
    if gt not in letters:
        raise SampleError(FailureKind.RECORD_INVALID,
                          f"{sample.key}: answer {gt} is not one of the options {''.join(letters)}")
    found = first_answer(output, parse)
    if found is None:
        return malformed(source=None)
    letter, cand = found
    ok = letter in letters
    return Score(1.0 if ok and letter == gt else 0.0, letter, ok, {"source": cand.source})


# ---------------------------------------------------------------------------------------------- numbers


def _parse_number(text: str, whole: bool) -> extract.Number | None:
    return extract.parse_number(text, whole)


def numbers_match(pred: extract.Number, gt: extract.Number) -> bool:
    """Equal at the ground truth's written precision: "5" == "5.0"; GT "3.2" accepts 3.24 (rounds to 3.2).

    An integer ground truth needs an (almost) exact value. A percent on either side may also be read as /100.
    """
    pairs = [(pred.value, gt.value, 1.0)]
    if pred.percent:
        pairs.append((pred.value / 100, gt.value, 1.0))
    if gt.percent:
        pairs.append((pred.value, gt.value / 100, 0.01))
    for p, g, scale in pairs:
        if 0 < gt.decimals < 6:  # strictly inside half a unit of the last written digit, in exact decimals:
            # 0.25 is not 0.2 (it is as far from 0.2 as from 0.3), 0.24 is
            tol = Fraction(1, 2) * Fraction(1, 10 ** gt.decimals) * Fraction(repr(scale))
            if abs(Fraction(repr(p)) - Fraction(repr(g))) < tol:
                return True
        elif abs(p - g) <= 1e-9 * max(1.0, abs(g)):
            return True
    return False


def score_numerical(sample: Sample, output: str, decimals: int | None = None) -> Score:
    """Equal at the truth's written precision, or, for a benchmark that says so (Video-MMMU: 2), after rounding
    both sides to `decimals` places (3.429 equals 3.43; 0.34 does not equal 0.3)."""
    gt = ground_truth(sample, _parse_number, "a number")
    found = first_answer(output, _parse_number)
    if found is None:
        return malformed(source=None)
    pred, cand = found
    if decimals is None:
        ok = numbers_match(pred, gt)
    else:
        ok = round(pred.value, decimals) == round(gt.value, decimals)
    return Score(1.0 if ok else 0.0, pred.text, True, {"source": cand.source})


def score_regression(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, _parse_number, "a number")
    found = first_answer(output, _parse_number)
    if found is None:
        return malformed(source=None, mra=0.0)
    pred, cand = found
    mra = paper_mra(pred.value, gt.value)  # the official code's `<=` in floats is the official reading's
    return Score(mra, pred.text, True, {"source": cand.source, "mra": mra})


def score_counting(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, _parse_number, "a count")
    found = first_answer(output, _parse_number)
    if found is None:
        return malformed(source=None)
    pred, cand = found
    integral = float(pred.value).is_integer()
    hit = integral and not pred.percent and math.isclose(pred.value, gt.value)
    return Score(1.0 if hit else 0.0, pred.text, integral, {"source": cand.source})


# ------------------------------------------------------------------------------------------------ yes / no


def _parse_yes_no(text: str, whole: bool) -> str | None:
    return extract.parse_yes_no(text, whole)


def score_boolean(sample: Sample, output: str) -> Score:
    """Yes/no. OVO-Bench SSR/CRR items take their truth from `fields["ovo_type"]` (1 = yes, 0 = no)."""
    ovo_type = sample.fields.get("ovo_type")
    if str(ovo_type) in ("0", "1"):
        gt = "yes" if str(ovo_type) == "1" else "no"
    else:
        gt = ground_truth(sample, _parse_yes_no, "yes or no")
    found = first_answer(output, _parse_yes_no)
    if found is None:
        return malformed(source=None)
    pred, cand = found
    return Score(1.0 if pred == gt else 0.0, pred, True, {"source": cand.source})


# ------------------------------------------------------------------------------------------- free text


def _parse_text(text: str, whole: bool) -> str | None:
    t = extract.clean_answer(text)
    return t or None


_QUOTED = re.compile(r"[\"“]([^\"“”\n]+)[\"”]")


def _parse_ocr_text(text: str, whole: bool) -> str | None:
    """Free text; in a whole output that quotes the text (`The sign reads "EXIT"`), the last quoted part."""
    quoted = _QUOTED.findall(text) if whole else []
    return _parse_text(quoted[-1], whole) if quoted else _parse_text(text, whole)


def score_ocr(sample: Sample, output: str) -> Score:
    """1 - word error rate (lower-cased words), clipped to [0, 1]; ANLS is reported alongside."""
    gt = ground_truth(sample, _parse_text, "text")
    found = first_answer(output, _parse_ocr_text)
    if found is None:
        return malformed(source=None, wer=1.0, anls=0.0)
    pred, cand = found
    wer = word_error_rate(pred, gt)
    return Score(clip01(1.0 - wer), pred, True, {"source": cand.source, "wer": wer, "anls": anls(pred, gt)})


def score_open_ended(sample: Sample, output: str) -> Score:
    """ROUGE-L F1 as the offline value; `needs_judge` tells the judge to override it."""
    gt = ground_truth(sample, _parse_text, "text", multiline=True)
    found = first_answer(output, _parse_text, multiline=True)
    if found is None:
        return malformed(source=None, needs_judge=True, rouge_l=0.0)
    pred, cand = found
    value = rouge_l(pred, gt)
    return Score(value, pred, True, {"source": cand.source, "needs_judge": True, "rouge_l": value})


# --------------------------------------------------------------------------------------- preference labels

_RESPONSE = re.compile(r"\b(?:response|answer|output|assistant|candidate)\s*[#(]?\s*(1|2|a|b|one|two)\b", re.I)
_TIE = re.compile(r"\b(?:tie|tied|equal|equally|both\s+(?:are\s+)?(?:equally\s+)?(?:good|bad))\b", re.I)
_ORDINAL = re.compile(r"\b(first|second|former|latter)\b", re.I)
_LABELS = {
    "1": "1",
    "a": "1",
    "one": "1",
    "first": "1",
    "former": "1",
    "2": "2",
    "b": "2",
    "two": "2",
    "second": "2",
    "latter": "2",
    "tie": "tie",
    "0": "tie",
}


def parse_preference(text: str, whole: bool = False) -> str | None:
    """ "1", "2" or "tie" from "Response 1", "A", "first", "Tie", ... ("Response 1 is better" reads as 1)."""
    t = extract.normalize_text(text)
    if t in _LABELS:
        return _LABELS[t]
    if t.startswith("response ") and t[9:] in _LABELS:
        return _LABELS[t[9:]]
    m = _RESPONSE.search(text)
    if m:
        return _LABELS[m.group(1).lower()]
    if _TIE.search(text):
        return "tie"
    m = _ORDINAL.search(text)
    return _LABELS[m.group(1).lower()] if m else None


def score_preference(sample: Sample, output: str) -> Score:
    gt = ground_truth(sample, parse_preference, "a preference label (Response 1 / Response 2 / Tie)")
    found = first_answer(output, parse_preference)
    if found is None:
        return malformed(source=None)
    label, cand = found
    return Score(1.0 if label == gt else 0.0, label, True, {"source": cand.source})
