"""Metric math and aggregation helpers: pure functions over numbers and strings, no parsing of model outputs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

# VSI-Bench's mean relative accuracy: confidence levels 0.50, 0.55, ..., 0.95 as the official code builds them,
# `numpy.linspace(.5, .95, 10)` in floating point (i * step + start, the last one exact), and the tolerances
# `1 - level` computed in floating point too. So 1 - 0.55 is 0.44999999999999996: a relative error of exactly 0.45
# (11 vs 20) passes only the 0.50 level, as it does in the official code.
_MRA_STEP = (0.95 - 0.5) / 9
MRA_THRESHOLDS: tuple[float, ...] = tuple(i * _MRA_STEP + 0.5 for i in range(9)) + (0.95,)
MRA_TOLERANCES: tuple[float, ...] = tuple(1 - t for t in MRA_THRESHOLDS)


def interval_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two [start, end] spans (end >= start). Two identical zero-length spans have IoU 1."""
    (s1, e1), (s2, e2) = a, b
    if (s1, e1) == (s2, e2):
        return 1.0
    inter = max(0.0, min(e1, e2) - max(s1, s2))
    union = max(e1, e2) - min(s1, s2)
    return _ratio(inter, union)


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two [x1, y1, x2, y2] boxes (x2 >= x1, y2 >= y1). Two identical zero-area boxes have IoU 1."""
    if tuple(a) == tuple(b):
        return 1.0
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return _ratio(inter, union)


def _ratio(inter: float, union: float) -> float:
    """inter / union in [0, 1]; 0 for an empty or non-finite union (overflowing coordinates)."""
    if not (union > 0.0 and math.isfinite(union) and math.isfinite(inter)):
        return 0.0
    return max(0.0, min(1.0, inter / union))


def recall_at_iou(tious: Iterable[float], thresholds: Sequence[float] = (0.3, 0.5, 0.7)) -> dict[str, float]:
    """Share of items whose IoU reaches each threshold (IoU >= t, as lmms-eval): {"R@0.3": .., "R@0.5": .., ...}.

    Every item counts, so failed or malformed outputs must be passed as IoU 0. Raises ValueError on no items.
    """
    values = [float(t) for t in tious]
    if not values:
        raise ValueError("recall_at_iou needs at least one IoU value")
    return {f"R@{t:g}": sum(v >= t for v in values) / len(values) for t in thresholds}


def mean_relative_accuracy(pred: float, gt: float) -> float:
    """VSI-Bench MRA: the share of levels t in 0.50..0.95 with |pred - gt| / gt <= 1 - t, in the official code's
    floating point (pred 4 vs truth 5 gives 0.6, not 0.7: 0.2 <= 1 - 0.8 fails there).

    A ground truth of 0 scores 1 only for an exact 0 (the official code divides by zero there).
    """
    if not (math.isfinite(pred) and math.isfinite(gt)):
        return 0.0
    if gt == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - gt) / abs(gt)  # the official code divides by the signed truth; every VSI-Bench truth is > 0
    return sum(rel <= tol for tol in MRA_TOLERANCES) / len(MRA_TOLERANCES)


def paper_mra(pred: float, gt: float) -> float:
    """MRA as the VSI-Bench paper defines it, for the careful reading: the share of the 10 levels 0.50, 0.55, ...,
    0.95 with |pred - gt| / gt < 1 - level, strictly and in exact decimals (pred 5 vs truth 4 gives 0.5: a
    relative error of 0.25 misses the 0.75 level). A ground truth of 0 scores 1 only for an exact 0."""
    from fractions import Fraction

    if not (math.isfinite(pred) and math.isfinite(gt)):
        return 0.0
    if gt == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(Fraction(repr(pred)) - Fraction(repr(gt))) / abs(Fraction(repr(gt)))
    return sum(rel < Fraction(50 - 5 * k, 100) for k in range(10)) / 10


def levenshtein(a: Sequence, b: Sequence) -> int:
    """Edit distance between two sequences (characters or words)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def word_error_rate(pred: str, gt: str) -> float:
    """Word-level edit distance over the number of ground-truth words (lower-cased, whitespace-split)."""
    p, g = pred.lower().split(), gt.lower().split()
    if not g:
        return 0.0 if not p else 1.0
    return levenshtein(p, g) / len(g)


def anls(pred: str, gt: str, threshold: float = 0.5) -> float:
    """Normalised Levenshtein similarity (DocVQA ANLS for one answer): 1 - NLD, or 0 when NLD >= threshold."""
    p, g = " ".join(pred.lower().split()), " ".join(gt.lower().split())
    if not p and not g:
        return 1.0
    longest = max(len(p), len(g))
    if abs(len(p) - len(g)) / longest >= threshold:
        # The distance is at least the length difference, so the score is 0 without the quadratic computation
        # (a record with a huge reference text must not stall the event loop).
        return 0.0
    nld = levenshtein(p, g) / longest
    return 1.0 - nld if nld < threshold else 0.0


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer, tokenizers  # imported on first use: it pulls in nltk

    tokenizer = tokenizers.DefaultTokenizer(use_stemmer=True)
    return tokenizer, rouge_scorer.RougeScorer(["rougeL"], tokenizer=tokenizer)


def rouge_l(pred: str, gt: str) -> float:
    """ROUGE-L F1 with stemming (rouge-score). Texts without Latin letters or digits (which rouge-score's tokenizer
    drops) are compared as whitespace-normalised strings instead: 1 if equal, else 0."""
    tokenizer, scorer = _rouge()
    if not tokenizer.tokenize(gt) or not tokenizer.tokenize(pred):
        return 1.0 if " ".join(pred.split()) == " ".join(gt.split()) and gt.strip() else 0.0
    return float(scorer.score(gt, pred)["rougeL"].fmeasure)
