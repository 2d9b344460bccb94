"""The task types: one `TaskType` record each, holding everything the package knows about a type in one place.

Its spellings in real annotation files, its scorer (by name, so the official protocols, the prompts and the
annotation check can name task types without importing every scorer), the template and metric a starter card
gives it, the aggregation a card of that type alone uses, and which metric detail is its careful reading.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from .base import UnknownTaskType

if TYPE_CHECKING:
    from ..samples import Sample
    from .base import Score

# The template a starter card routes a type to when the type asks for no answer format of its own.
FALLBACK_TEMPLATE = "instructed"


@dataclass(frozen=True)
class TaskType:
    name: str  # the canonical spelling
    # The spellings found in real annotation files (the predecessor's evaluation and training data); matching
    # ignores case and treats "-", "_" and spaces alike.
    aliases: tuple[str, ...]
    scorer_ref: str  # "module:function" inside vbench_async.scoring
    template: str = FALLBACK_TEMPLATE  # a starter card's template for it
    metric: str = "accuracy"  # a starter card's metric name for it
    aggregation: str = "micro"  # the aggregation kind of a card whose samples are all of this type
    # The metric detail that is the careful reading, where `Score.value` keeps an older meaning (STVG: value is
    # EasyVideoR1's 0.5 tIoU + 0.5 box IoU; the careful reading is ST-Align's vIoU).
    robust_metric: str | None = None

    @cached_property
    def scorer(self) -> Callable[[Sample, str], Score]:
        module, _, function = self.scorer_ref.partition(":")
        scorer: Callable[[Sample, str], Score] = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        return scorer


TASK_TYPES: tuple[TaskType, ...] = (
    TaskType("multiple choice", ("multiple_choice", "mc", "mcq"), "tasks:score_multiple_choice", "multiple_choice"),
    TaskType("numerical", ("number", "numeric"), "tasks:score_numerical", "numeric"),
    TaskType("regression", ("numerical regression",), "tasks:score_regression", "numeric", "MRA"),
    TaskType("counting", ("count", "REC"), "tasks:score_counting", "numeric"),  # OVO-Bench REC: how many times
    TaskType("boolean", ("yes/no", "yes_no", "binary classification", "SSR", "CRR"), "tasks:score_boolean",
             "yes_no"),
    TaskType("temporal grounding", ("tvg", "moment retrieval"), "grounding:score_temporal_grounding",
             "temporal_grounding", "mIoU", "temporal_grounding"),
    TaskType("spatial grounding", ("visual grounding",), "grounding:score_spatial_grounding"),
    TaskType("spatial-temporal grounding", ("spatio-temporal grounding", "spatiotemporal grounding", "stvg"),
             "grounding:score_spatial_temporal_grounding", "spatial_temporal_grounding", "m_vIoU", "stvg",
             robust_metric="viou"),
    TaskType("tracking", ("object tracking",), "grounding:score_tracking"),
    TaskType("ocr", (), "tasks:score_ocr", "open_answer", "1 - word error rate"),
    TaskType("math", ("mathematics",), "math_task:score_math", "open_answer"),
    TaskType("open-ended", ("free-form", "video qa", "video description", "caption"), "tasks:score_open_ended",
             "open_answer", "ROUGE-L offline (LLM judge: `vbench-async judge`)"),
    TaskType("code", ("coding", "svg-code", "html-code"), "code_task:score_code"),
    TaskType("preference", ("llava", "critic"), "tasks:score_preference"),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


_BY_SPELLING: dict[str, TaskType] = {}
for _type in TASK_TYPES:
    for _name in (_type.name, *_type.aliases):
        assert _BY_SPELLING.setdefault(_key(_name), _type) is _type, f"alias {_name!r} routes twice"


def known_task_types() -> list[str]:
    """The canonical task types, in the order of the table."""
    return [t.name for t in TASK_TYPES]


def task_type(problem_type: str) -> TaskType:
    """The record of a `problem_type` spelling; raise UnknownTaskType (a ValueError) if none."""
    found = _BY_SPELLING.get(_key(problem_type)) if isinstance(problem_type, str) else None
    if found is None:
        raise UnknownTaskType(str(problem_type), known_task_types())
    return found


def canonical_task_type(problem_type: str) -> str:
    """Map a `problem_type` spelling to its canonical type; raise UnknownTaskType (a ValueError) if none."""
    return task_type(problem_type).name


def canonical_or_given(problem_type: str) -> str:
    """The canonical type of a spelling, or the spelling itself when no scorer knows it (a card may route a task
    type of its own to a template; the scorer check reports it elsewhere)."""
    return _canonical_or_given(problem_type) if isinstance(problem_type, str) else problem_type


@lru_cache(maxsize=4096)  # called per sample by rendering and scoring; a suite spells a few task types
def _canonical_or_given(problem_type: str) -> str:
    found = _BY_SPELLING.get(_key(problem_type))
    return found.name if found is not None else problem_type
