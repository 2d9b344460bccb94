"""The `Score` hand-off and the errors of the scoring package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    """How one model output scored against one sample's ground truth.

    `value` is in [0, 1]. `extracted` is the answer read from the output (None when nothing could be read).
    `well_formed` says whether the output held a parseable answer of the right form; a malformed output always
    has value 0. `details` holds the metric parts and the extraction step that found the answer ("source"),
    and is JSON-serialisable.
    """

    value: float
    extracted: str | None
    well_formed: bool
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "extracted": self.extracted,
            "well_formed": self.well_formed,
            "details": dict(self.details),
        }


def malformed(**details: Any) -> Score:
    """The score of an output with no usable answer."""
    return Score(0.0, None, False, details)


def clip01(x: float) -> float:
    """Clamp to [0, 1]; NaN becomes 0."""
    if not x > 0.0:  # also catches NaN
        return 0.0
    return 1.0 if x > 1.0 else float(x)


class UnknownTaskType(ValueError):
    """A `problem_type` that no scorer handles. The message lists the known types."""

    def __init__(self, problem_type: str, known: list[str]):
        super().__init__(
            f"unknown task type {problem_type!r}; known task types: {', '.join(known)} "
            "(aliases such as 'multiple_choice', 'boolean', 'SSR', 'REC' map onto these)"
        )
        self.problem_type = problem_type
        self.known = known
