"""Task-aware scoring: one implementation for evaluation metrics and RL rewards.

    score(sample_or_record, output, protocol=None) -> Score(value, extracted, well_formed, details, official, robust)
    reward(sample_or_record, output, format_weight=0.1) -> float   (uses the robust reading)

Modules: `extract` and `letters` (named answer-extraction steps), `tasks` / `grounding` / `math_task` /
`code_task` (one scorer per task type), `metrics` (IoU, MRA, WER, ANLS, ROUGE-L and aggregation helpers),
`router` (routing by `problem_type`, `score`, `reward`), `official` (each benchmark's own protocol, for
`Score.official`). See docs/scoring.md.
"""

from .base import Reading, Score, UnknownTaskType
from .metrics import box_iou, interval_iou, mean_relative_accuracy, recall_at_iou
from .official import PROTOCOLS
from .router import check_sample, format_score, reward, reward_parts, score
from .task_types import TASK_TYPES, TaskType, canonical_or_given, canonical_task_type, known_task_types, task_type

__all__ = [
    "PROTOCOLS",
    "TASK_TYPES",
    "TaskType",
    "Reading",
    "Score",
    "UnknownTaskType",
    "box_iou",
    "canonical_or_given",
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
    "task_type",
]
