"""Metric math and aggregation helpers: pure functions over numbers and strings, no parsing of model outputs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

# VSI-Bench's mean relative accuracy: confidence thresholds 0.50, 0.55, ..., 0.95 (kept as exact decimals).
MRA_THRESHOLDS: tuple[float, ...] = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))


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
    """VSI-Bench MRA: the share of thresholds t in 0.50..0.95 with |pred - gt| / |gt| <= 1 - t.

    `<=` as in the official VSI-Bench code. A ground truth of 0 scores 1 only for an exact 0.
    """
    if not (math.isfinite(pred) and math.isfinite(gt)):
        return 0.0
    if gt == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - gt) / abs(gt)
    return sum(rel <= round(1.0 - t, 2) + 1e-12 for t in MRA_THRESHOLDS) / len(MRA_THRESHOLDS)


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
