"""Routing in one place: `problem_type` -> scorer, and the two entry points built on it, `score` and `reward`.

Evaluation stores `score(...)`; the RL add-on uses `reward(...)`, which is the same score plus a format term, so
metrics and rewards can never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from ..errors import SampleError
from ..samples import Sample, parse_record
from . import answer_extraction as extract
from .base import Reading, Score, ScorerUnavailable, clip01, malformed
from .official import Protocol, get_protocol
from .task_types import task_type
from .tasks import score_numerical

log = logging.getLogger(__name__)

Scorer = Callable[[Sample, str], Score]


def _as_sample(sample: Sample | Mapping[str, Any]) -> Sample:
    return sample if isinstance(sample, Sample) else parse_record(sample, benchmark="record", index=0)


def score(sample: Sample | Mapping[str, Any], output: str, protocol: str | None = None) -> Score:
    """Score one model output against one sample (a Sample or a unified-format record).

    `Score.robust` is the careful grader's reading: (value, extracted), except that free text needing a judge has
    no robust value (value keeps its ROUGE-L fallback) and spatio-temporal grounding reports ST-Align's vIoU. With
    `protocol` (a benchmark card's `official.protocol`, see `official.PROTOCOLS`) `Score.official` holds the
    benchmark's own reading of the output; without one it is None.

    Never raises on the output: anything unreadable scores 0 with well_formed=False. Raises UnknownTaskType for an
    unknown task type, ValueError for an unknown protocol, SampleError("record_invalid") when the sample
    itself (its ground truth) is unreadable, and ScorerUnavailable when the scorer could not check the answer.
    """
    sample = _as_sample(sample)
    proto = get_protocol(protocol) if protocol is not None else None
    kind = task_type(sample.task_type)
    canonical, scorer = kind.name, kind.scorer
    if proto is not None and proto.numeric_decimals is not None and canonical == "numerical":
        scorer = partial(score_numerical, decimals=proto.numeric_decimals)
    if not isinstance(output, str):
        output = "" if output is None else str(output)
    result = _run(scorer, sample, output)
    # Free text needs a judge: the careful grader claims no value for it (`value` keeps the ROUGE-L fallback).
    needs_judge = result.needs_judge
    value = result.details.get(kind.robust_metric, 0.0) if kind.robust_metric else result.value
    robust = Reading(None if needs_judge else value, result.extracted, needs_judge=needs_judge)
    official = _official(proto, sample, output) if proto is not None else None
    details = result.details if proto is None else {**result.details, "protocol": proto.name}
    return replace(result, details=details, official=official, robust=robust)


def _run(scorer: Scorer, sample: Sample, output: str) -> Score:
    try:
        result = scorer(sample, output)
    except (SampleError, ScorerUnavailable):
        raise
    except Exception as exc:  # a scorer bug must not take a whole run down: score 0 and say why
        log.exception("scorer for %r failed on %s", sample.task_type, sample.key)
        return malformed(source=None, scorer_error=f"{type(exc).__name__}: {exc}"[:300])
    if not result.well_formed:
        return Score(0.0, result.extracted, False, result.details)
    return Score(clip01(result.value), result.extracted, True, result.details)


def _official(proto: Protocol, sample: Sample, output: str) -> Reading:
    """The official protocol's reading; empty for "none". A bug in a protocol scores 0, logged."""
    if proto.grade is None:
        return Reading(None, None)
    try:
        reading = proto.grade(sample, output)
    except (SampleError, ScorerUnavailable):
        raise
    except Exception as exc:
        log.exception("official protocol %r failed on %s", proto.name, sample.key)
        return Reading(0.0, f"protocol error: {type(exc).__name__}: {exc}"[:200])
    value = None if reading.value is None else clip01(reading.value)
    return replace(reading, value=value)


def check_sample(sample: Sample | Mapping[str, Any]) -> Sample:
    """Validate a sample before a run or training starts: known task type and a readable ground truth.

    Returns the parsed Sample; raises UnknownTaskType or SampleError.
    """
    sample = _as_sample(sample)
    score(sample, "")
    return sample


FORMAT_MODES = ("answer_tag", "well_formed", "none")


def format_score(output: str, result: Score, mode: str = "answer_tag") -> float:
    """The format term of the reward.

    "answer_tag" (the predecessor's rule): 0 without an `<answer>` tag, 1 when the answer was read from the tag and
    has the right form, 0.5 for a tag whose content is not a valid answer. "well_formed": 1 if the output had a
    valid answer anywhere. "none": always 0.
    """
    if mode == "answer_tag":
        if not isinstance(output, str) or not extract.has_answer_tag(output):
            return 0.0
        return 1.0 if result.well_formed and result.source == "answer_tag" else 0.5
    if mode == "well_formed":
        return 1.0 if result.well_formed else 0.0
    if mode == "none":
        return 0.0
    raise ValueError(f"unknown format mode {mode!r}; use one of {', '.join(FORMAT_MODES)}")


def reward_parts(
    sample: Sample | Mapping[str, Any],
    output: str,
    format_weight: float = 0.1,
    *,
    accuracy_weight: float | None = None,
    format_mode: str = "answer_tag",
) -> dict[str, float]:
    """{"overall", "accuracy", "format"}: overall = accuracy_weight * accuracy + format_weight * format.

    `accuracy` is the robust score, `score(...).robust.value` (equal to `.value`); `accuracy_weight` defaults to
    1 - format_weight.
    """
    if accuracy_weight is None:
        accuracy_weight = 1.0 - format_weight
    if format_weight < 0 or accuracy_weight < 0:
        raise ValueError(f"reward weights must be non-negative, got format={format_weight}, accuracy={accuracy_weight}")
    if format_mode not in FORMAT_MODES:
        raise ValueError(f"unknown format mode {format_mode!r}; use one of {', '.join(FORMAT_MODES)}")
    result = score(sample, output)
    fmt = format_score(output, result, format_mode)
    # Training uses the robust score; free text (no robust value until a judge runs) keeps its ROUGE-L fallback.
    accuracy = result.robust.value if result.robust is not None and result.robust.value is not None else result.value
    return {
        "overall": accuracy_weight * accuracy + format_weight * fmt,
        "accuracy": accuracy,
        "format": fmt,
    }


def reward(
    sample: Sample | Mapping[str, Any],
    output: str,
    format_weight: float = 0.1,
    *,
    accuracy_weight: float | None = None,
    format_mode: str = "answer_tag",
) -> float:
    """The RL reward of one output: `reward_parts(...)["overall"]`."""
    return reward_parts(sample, output, format_weight, accuracy_weight=accuracy_weight, format_mode=format_mode)[
        "overall"
    ]
