"""Questions about a scene, with answers read off the scene itself (never guessed), in six groups.

Each group becomes one demo benchmark: multiple choice, counting (numerical), temporal grounding, spatio-temporal
grounding, OCR and yes/no. `problem_type` uses the spellings of the real annotation files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .videos import COLORS, SHAPES, Scene, Shape

# group -> problem_type, as the real unified files spell them (yes/no has no real-file spelling besides OVO's
# "SSR"/"CRR", whose prompts are task-specific; "yes/no" is the plain name the scorers map to the boolean task).
GROUPS: dict[str, str] = {
    "mc": "multiple choice",
    "count": "numerical",
    "tg": "temporal grounding",
    "stvg": "spatial-temporal grounding",
    "ocr": "OCR",
    "yesno": "yes/no",
}
_LETTERS = "ABCDEFGHIJ"
_STVG_SUFFIX = (" Please find the corresponding time period in the video."
                " Please describe the location of the corresponding subject/object in this video.")


@dataclass(frozen=True)
class Question:
    group: str
    problem: str
    solution: str  # the unified format's answer, wrapped in <answer>...</answer>
    category: str
    options: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    @property
    def problem_type(self) -> str:
        return GROUPS[self.group]


def _answer(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
    return f"<answer>{text}</answer>"


def _choice(rng: np.random.Generator, group: str, problem: str, correct: str, pool: list[str],
            category: str) -> Question:
    """A four-option question: the correct value and three distractors from `pool`, shuffled, letters A-D."""
    distractors = [str(p) for p in rng.permutation([p for p in pool if p != correct])[:3]]
    values = [str(v) for v in rng.permutation([correct, *distractors])]
    options = tuple(f"{_LETTERS[i]}. {v}" for i, v in enumerate(values))
    return Question(group, problem, _answer(_LETTERS[values.index(correct)]), category, options)


def scene_questions(scene: Scene, rng: np.random.Generator) -> dict[str, list[Question]]:
    """All questions the scene supports, by group (each list shuffled)."""
    moving = [s for s in scene.shapes if s.direction is not None]
    flashing = [s for s in scene.shapes if len(s.intervals) > 1 or s.direction is None]
    caption = scene.captions[0]
    present_colors = [s.color for s in scene.shapes]
    out: dict[str, list[Question]] = {g: [] for g in GROUPS}

    for s in scene.shapes:
        out["mc"].append(_choice(rng, "mc", f"What color is the {s.kind} in the video?", s.color,
                                 list(COLORS), "color"))
        out["mc"].append(_choice(rng, "mc", f"What shape is the {s.color} object?", s.kind, list(SHAPES), "shape"))
    for s in moving:
        out["mc"].append(_choice(rng, "mc", f"In which direction does the {s.label} move?", str(s.direction),
                                 ["left", "right", "up", "down"], "motion"))
        out["tg"].append(Question("tg", f"the {s.label} is visible.", _answer({"time": list(_span(scene, s))}),
                                  "appearance"))
        boxes = scene.boxes_per_second(s)
        if boxes:
            gt = {"time": list(_span(scene, s)), "boxes": boxes}
            out["stvg"].append(Question("stvg", f"Where is the {s.label}?{_STVG_SUFFIX}", _answer(gt),
                                        "moving shape"))
        wrong = str(rng.choice([d for d in ("left", "right", "up", "down") if d != s.direction]))
        asked = str(s.direction) if rng.random() < 0.5 else wrong
        out["yesno"].append(Question("yesno", f"Does the {s.label} move {_toward(asked)}?",
                                     _answer("Yes" if asked == s.direction else "No"), "motion"))
    for s in flashing:
        out["count"].append(Question("count", f"How many times does the {s.label} flash?",
                                     _answer(str(len(s.intervals))), "flash count"))
    out["count"].append(Question("count", "How many different shapes appear in the video?",
                                 _answer(str(len(scene.shapes))), "object count"))
    out["tg"].append(Question("tg", f'the text "{caption.text}" is shown on screen.',
                              _answer({"time": list(scene.span(caption.first, caption.last))}), "text"))
    out["ocr"].append(Question("ocr", "What text is shown in the video?", _answer(caption.text), "caption"))
    out["ocr"].append(Question("ocr", "What number is written on the screen?",
                               _answer(caption.text.split()[-1]), "number"))

    present = rng.choice(scene.shapes)
    out["yesno"].append(Question("yesno", f"Is there a {present.label} in the video?", _answer("Yes"),
                                 "existence"))
    absent_color = str(rng.choice([c for c in COLORS if c not in present_colors]))
    kind = str(rng.choice(SHAPES))
    out["yesno"].append(Question("yesno", f"Is there a {absent_color} {kind} in the video?", _answer("No"),
                                 "existence"))
    return {g: [qs[i] for i in rng.permutation(len(qs))] for g, qs in out.items()}


def _span(scene: Scene, shape: Shape) -> tuple[float, float]:
    return scene.span(shape.first, shape.last)


def _toward(direction: str) -> str:
    return {"left": "to the left", "right": "to the right", "up": "up", "down": "down"}[direction]
