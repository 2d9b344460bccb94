"""The `Score` hand-off and the errors of the scoring package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Reading:
    """One grader's verdict on one output: the benchmark's own protocol (`official`) or the careful one (`robust`).

    `value` is in [0, 1], or None while the protocol still needs an LLM judge for this item (`needs_judge`).
    `guessed` marks a value that the official code draws at random for an unreadable answer (seeded by sample id).
    `dropped` marks an item the official aggregation leaves out of its denominator (MVBench's and Video-MMMU's
    empty predictions); its value is 0 for any per-sample use. `judged` marks an official reading whose value an
    LLM judge's verdict filled in (`results.verdicts.judge_line`).
    """

    value: float | None
    extracted: str | None = None
    guessed: bool = False
    needs_judge: bool = False
    dropped: bool = False
    judged: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "extracted": self.extracted, "guessed": self.guessed,
                               "needs_judge": self.needs_judge}
        # The marks are written only when set: lines of every other item keep their shape.
        if self.dropped:
            out["dropped"] = True
        if self.judged:
            out["judged"] = True
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reading:
        """The reading a result line stores (`to_dict`'s shape): a key an older or hand-made line lacks takes its
        default, an unknown key is ignored, and values are kept as stored (an int value stays an int), so `to_dict`
        gives the stored dict back."""
        return cls(value=d.get("value"), extracted=d.get("extracted"), guessed=bool(d.get("guessed")),
                   needs_judge=bool(d.get("needs_judge")), dropped=bool(d.get("dropped")),
                   judged=bool(d.get("judged")))


@dataclass(frozen=True)
class Score:
    """How one model output scored against one sample's ground truth.

    `value` is in [0, 1]. `extracted` is the answer read from the output (None when nothing could be read).
    `well_formed` says whether the output held a parseable answer of the right form; a malformed output always
    has value 0. `details` holds the metric parts and the extraction step that found the answer ("source"),
    and is JSON-serialisable.

    `robust` is the careful grader's reading, (value, extracted) except for free text awaiting a judge (no value)
    and spatio-temporal grounding (ST-Align's vIoU); `official` is the benchmark's own protocol (None when no
    protocol was asked for). Both are filled by `score(...)`; a task scorer returns neither.
    """

    value: float
    extracted: str | None
    well_formed: bool
    details: dict[str, Any] = field(default_factory=dict)
    official: Reading | None = None
    robust: Reading | None = None

    @property
    def source(self) -> str | None:
        """The extraction step that found the answer (`details["source"]`; `extract.Candidate.source`)."""
        found = self.details.get("source")
        return found if isinstance(found, str) else None

    @property
    def needs_judge(self) -> bool:
        """The scorer hands this output to an LLM judge (`details["needs_judge"]`: free text)."""
        return bool(self.details.get("needs_judge"))

    @property
    def differs(self) -> bool:
        """Whether the official and the robust grader disagree on this sample (False without an official value)."""
        return bool(self.official and self.robust and self.official.value is not None
                    and self.official.value != self.robust.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "extracted": self.extracted,
            "well_formed": self.well_formed,
            "details": dict(self.details),
            "official": self.official.to_dict() if self.official else None,
            "robust": self.robust.to_dict() if self.robust else None,
        }


def malformed(**details: Any) -> Score:
    """The score of an output with no usable answer."""
    return Score(0.0, None, False, details)


def clip01(x: float) -> float:
    """Clamp to [0, 1]; NaN becomes 0."""
    if not x > 0.0:  # also catches NaN
        return 0.0
    return 1.0 if x > 1.0 else float(x)


class ScorerUnavailable(RuntimeError):
    """A scorer's own machinery failed (a worker process that cannot start): the answer was not checked, so the
    sample gets a `score_error`, never a 0."""


class UnknownTaskType(ValueError):
    """A `problem_type` that no scorer handles. The message lists the known types."""

    def __init__(self, problem_type: str, known: list[str]):
        super().__init__(
            f"unknown task type {problem_type!r}; known task types: {', '.join(known)} "
            "(aliases such as 'multiple_choice', 'boolean', 'SSR', 'REC' map onto these)"
        )
        self.problem_type = problem_type
        self.known = known
