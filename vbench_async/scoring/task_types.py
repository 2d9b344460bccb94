"""The canonical task types and the spellings of them found in real annotation files.

Kept apart from the router (which maps each type to its scorer) so that the official protocols, the prompts and the
annotation check can name task types without importing every scorer.
"""

from __future__ import annotations

import re

from .base import UnknownTaskType

# canonical task type -> aliases: the spellings found in real annotation files (the predecessor's evaluation and
# training data); matching ignores case and treats "-", "_" and spaces alike.
TASK_ALIASES: dict[str, tuple[str, ...]] = {
    "multiple choice": ("multiple_choice", "mc", "mcq"),
    "numerical": ("number", "numeric"),
    "regression": ("numerical regression",),
    "counting": ("count", "REC"),  # OVO-Bench REC: how many times
    "boolean": ("yes/no", "yes_no", "binary classification", "SSR", "CRR"),
    "temporal grounding": ("tvg", "moment retrieval"),
    "spatial grounding": ("visual grounding",),
    "spatial-temporal grounding": ("spatio-temporal grounding", "spatiotemporal grounding", "stvg"),
    "tracking": ("object tracking",),
    "ocr": (),
    "math": ("mathematics",),
    "open-ended": ("free-form", "video qa", "video description", "caption"),
    "code": ("coding", "svg-code", "html-code"),
    "preference": ("llava", "critic"),
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


_ROUTES: dict[str, str] = {}
for _canonical, _aliases in TASK_ALIASES.items():
    for _name in (_canonical, *_aliases):
        assert _ROUTES.setdefault(_key(_name), _canonical) == _canonical, f"alias {_name!r} routes twice"


def known_task_types() -> list[str]:
    """The canonical task types, in the order of the table."""
    return list(TASK_ALIASES)


def canonical_task_type(problem_type: str) -> str:
    """Map a `problem_type` spelling to its canonical type; raise UnknownTaskType (a ValueError) if none."""
    canonical = _ROUTES.get(_key(problem_type)) if isinstance(problem_type, str) else None
    if canonical is None:
        raise UnknownTaskType(str(problem_type), known_task_types())
    return canonical
