"""Task-aware scoring: one implementation for evaluation metrics and RL rewards.

    score(sample_or_record, output) -> Score(value, extracted, well_formed, details)
    reward(sample_or_record, output, format_weight=0.1) -> float

Modules: `extract` and `letters` (named answer-extraction steps), `tasks` / `grounding` / `math_task` /
`code_task` (one scorer per task type), `metrics` (IoU, MRA, WER, ANLS, ROUGE-L and aggregation helpers),
`router` (routing by `problem_type`, `score`, `reward`). See docs/scoring.md.
"""

from .base import Score, UnknownTaskType
from .metrics import box_iou, interval_iou, mean_relative_accuracy, recall_at_iou
from .router import (
    canonical_task_type,
    check_sample,
    format_score,
    known_task_types,
    reward,
    reward_parts,
    score,
)

__all__ = [
    "Score",
    "UnknownTaskType",
    "box_iou",
    "canonical_task_type",
    "check_sample",
    "format_score",
    "interval_iou",
    "known_task_types",
    "mean_relative_accuracy",
    "recall_at_iou",
    "reward",
    "reward_parts",
    "score",
]
