"""Chance level: the score a model would get by guessing uniformly among a question's options.

Shown beside every headline so a reader can tell "no better than guessing" (and a random-weight model's near-zero)
from a broken scorer. Only questions with a closed answer set have a chance level: multiple choice (1 / options) and
yes/no (1/2). Free-form answers (numbers, text, spans, boxes) have none: guessing them scores about 0, and so does a
model that does not write the expected format.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .base import UnknownTaskType
from .task_types import canonical_task_type

_BOOLEAN = "boolean"
_CHOICE = "multiple choice"


def sample_chance(task_type: str | None, options: Sequence[Any] | None) -> float | None:
    """Expected score of a uniform guess on one question; None for a free-form answer."""
    try:
        canonical = canonical_task_type(task_type) if task_type else None
    except UnknownTaskType:
        return None
    if canonical == _BOOLEAN:
        return 0.5
    if canonical == _CHOICE and options:
        return 1.0 / len(options)
    return None


def chance_level(results: Iterable[Any]) -> float | None:
    """Mean chance over the result lines (failures included: they are in the denominator too); None when no line has
    a closed answer set."""
    values: list[float] = []
    n = 0
    for r in results:  # Result records or their dicts
        n += 1
        task_type, options = (r.get("task_type"), r.get("options")) if isinstance(r, Mapping) else \
            (getattr(r, "task_type", None), getattr(r, "options", None))
        c = sample_chance(task_type, options)
        if c is not None:
            values.append(float(c))
    if not values:
        return None
    return sum(values) / n  # free-form lines among closed ones count as 0: a guess at them scores nothing
