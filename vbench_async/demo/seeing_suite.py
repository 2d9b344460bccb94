"""The seeing suite: short synthetic videos whose questions a tiny model can learn to answer from the pixels alone.

Every question's text and options are the same for every video, so the answer is a function of the video only: a
model that answers above chance must have seen the frames, and with the frames blanked it falls to chance. The
demo suite's questions name one shape of several ("the red circle"), which a 2-layer model does not learn to look up
in a CPU's minutes (docs/seeing-models.md); these do not. One question needs time: whether the shapes are on screen
at the start or at the end, which reversing or shuffling the frames breaks.

Each video shows 1-3 identical stationary shapes (one colour of four, one kind, one size) on screen during either
the first or the last 40% of the video. Layout of a generated folder (what a seeing card points at):
    videos/s000.mp4 ...       H.264, 2-8 s, the demo's frame rates, small landscape, portrait and square sizes
    annotations/<group>.json  one file per group in `SEEING_GROUPS`
    suite.json                parameters and every scene as drawn
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import build_once, default_home
from .questions import Question
from .suite import FRAME_RATES, record_of, scene_dict, write_videos_and_annotations
from .videos import Scene, Shape

SEEING_VERSION = 2  # bump when generation changes what gets written (2: the `many` group)
SEEING_PARAMS: dict[str, Any] = dict(n_videos=48, seed=0)
# group -> (problem_type, question, options); the options' order never changes
SEEING_COLORS = ("red", "green", "blue", "yellow")
SEEING_GROUPS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "color": ("multiple choice", "What color are the shapes in the video?", SEEING_COLORS),
    "count": ("numerical", "How many shapes are shown in the video?", ()),
    "size": ("yes/no", "Are the shapes in the video large?", ()),
    "when": ("multiple choice", "When are the shapes shown in the video?",
             ("at the start of the video", "at the end of the video")),
    # Not a question the seeing models were trained on: `make demo-rl` teaches it by RL. Asked of the videos with one
    # or three shapes only, so Yes and No are equally often right and a constant answer scores exactly 1/2.
    "many": ("yes/no", "Is there more than one shape?", ()),
}
MANY_COUNTS = (1, 3)  # the shape counts the `many` question is asked about
SIZES = ((160, 96), (96, 160), (128, 128), (192, 108), (108, 192), (144, 144))
_BACKGROUNDS = ((40, 40, 52), (30, 46, 40), (48, 36, 36), (36, 36, 60))
_KINDS = ("circle", "square", "triangle", "diamond")
_ON_SHARE = 0.4  # the shapes are on screen for the first or the last 40% of the frames


def seeing_suite_dir(home: Path | None = None) -> Path:
    return (home or default_home()) / "suites" / f"seeing-v{SEEING_VERSION}"


def ensure_seeing_suite(home: Path | None = None) -> Path:
    """Return the seeing suite folder, generating it on first use (atomic, like the demo suite)."""
    return build_once(seeing_suite_dir(home), lambda tmp: generate_seeing_suite(tmp, **SEEING_PARAMS))


TRAINING_SPLIT_SEED = 5  # `make demo-rl`'s videos: neither the evaluation's seed 0 nor the seeing models' 1000/1001
TRAINING_SPLIT_VIDEOS = 144  # three times every combination of facts: too many for a tiny model to learn by heart


def ensure_seeing_training_split(home: Path | None = None) -> Path:
    """A seeing suite of other videos (seed TRAINING_SPLIT_SEED), for training on a question without having seen the
    evaluation's videos; generated on first use beside the seeing suite."""
    target = (home or default_home()) / "suites" / (f"seeing-train-v{SEEING_VERSION}-seed{TRAINING_SPLIT_SEED}"
                                                    f"-n{TRAINING_SPLIT_VIDEOS}")
    params = {**SEEING_PARAMS, "seed": TRAINING_SPLIT_SEED, "n_videos": TRAINING_SPLIT_VIDEOS}
    return build_once(target, lambda tmp: generate_seeing_suite(tmp, **params), required=("suite.json",))


def facts_of(k: int) -> tuple[str, int, bool, bool]:
    """(colour, count, large, at the start) number `k`: 48 consecutive numbers cross every combination once."""
    return SEEING_COLORS[k % 4], 1 + (k // 4) % 3, bool((k // 12) % 2), bool((k // 24) % 2)


def plan_seeing_scene(rng: np.random.Generator, name: str, width: int, height: int, fps: Fraction,
                      duration: float, facts: tuple[str, int, bool, bool]) -> Scene:
    """`facts` (see `facts_of`) drawn as identical shapes of a random kind, placed at random, never touching."""
    n = max(4, round(duration * fps))
    color, count, large, at_start = facts
    kind = _KINDS[int(rng.integers(4))]
    side = max(8, int(min(width, height) * (0.44 if large else 0.26)))  # a small one: about a vision token
    on = max(1, round(_ON_SHARE * n))
    interval = (0, on - 1) if at_start else (n - on, n - 1)
    cell = side + 4  # one shape per cell of a grid, jittered inside it: shapes never touch
    cols, rows = width // cell, height // cell
    if cols * rows < count:  # pragma: no cover - every size in SIZES has room for three
        raise RuntimeError(f"no room for {count} shapes of side {side} in {width}x{height}")
    cells = rng.permutation(cols * rows)[:count]
    pad_x, pad_y = (width - cols * cell) // cols, (height - rows * cell) // rows
    corners = [(int(c % cols) * (cell + pad_x) + int(rng.integers(0, pad_x + 3)),
                int(c // cols) * (cell + pad_y) + int(rng.integers(0, pad_y + 3))) for c in cells]
    shapes = tuple(Shape(kind=kind, color=color, size=side, intervals=(interval,), start=xy, end=xy) for xy in corners)
    background = _BACKGROUNDS[int(rng.integers(len(_BACKGROUNDS)))]
    return Scene(name=name, width=width, height=height, fps=fps, num_frames=n, background=background,
                 shapes=shapes, captions=())


def is_large(side: int, width: int, height: int) -> bool:
    """Whether a shape of `side` pixels is a large one (`plan_seeing_scene` draws 0.44 or 0.26 of the short side)."""
    return side >= 0.35 * min(width, height)


def seeing_questions(scene: Scene) -> list[Question]:
    """One question per group, answered from the scene (`many` only of scenes with a count in MANY_COUNTS)."""
    first = scene.shapes[0]
    large = is_large(first.size, scene.width, scene.height)
    at_start = first.first == 0
    n = len(scene.shapes)
    answers = {"color": "ABCD"[SEEING_COLORS.index(first.color)], "count": str(n),
               "size": "Yes" if large else "No", "when": "A" if at_start else "B", "many": "Yes" if n > 1 else "No"}
    categories = {"color": first.color, "count": f"{n} shape{'s' if n > 1 else ''}",
                  "size": "large" if large else "small", "when": "start" if at_start else "end",
                  "many": f"{n} shape{'s' if n > 1 else ''}"}
    out = []
    for group, (_kind, problem, options) in SEEING_GROUPS.items():
        if group == "many" and n not in MANY_COUNTS:
            continue
        lettered = tuple(f"{'ABCD'[i]}. {o}" for i, o in enumerate(options))
        out.append(Question(group, problem, f"<answer>{answers[group]}</answer>", categories[group], lettered))
    return out


def generate_seeing_suite(out_dir: Path, n_videos: int = 48, seed: int = 0, min_s: float = 2.0, max_s: float = 8.0,
                          workers: int | None = None) -> dict[str, int]:
    """Write `n_videos` videos and one question per group each into `out_dir`; deterministic for the arguments."""
    if n_videos < 1 or not 0 < min_s <= max_s:
        raise ValueError(f"need n_videos >= 1 and 0 < min_s <= max_s, got {n_videos}, {min_s}, {max_s}")
    out_dir = Path(out_dir)
    records: dict[str, list[dict[str, Any]]] = {g: [] for g in SEEING_GROUPS}
    scenes = []
    order = np.random.default_rng([seed, n_videos, 7]).permutation(n_videos)  # balanced answers, shuffled
    for i in range(n_videos):
        rng = np.random.default_rng([seed, i, 7])  # 7: never the demo suite's stream for the same seed and index
        width, height = SIZES[i % len(SIZES)]
        fps = FRAME_RATES[(i + i // len(SIZES)) % len(FRAME_RATES)]
        duration = float(np.round(rng.uniform(min_s, max_s), 1))
        scene = plan_seeing_scene(rng, f"s{i:03d}", width, height, fps, duration, facts_of(int(order[i])))
        for q in seeing_questions(scene):
            records[q.group].append(record_of(q, scene, len(records[q.group]), SEEING_GROUPS[q.group][0], "seeing"))
        scenes.append(scene)
    counts = write_videos_and_annotations(out_dir, scenes, records, workers)
    manifest = {"name": "seeing", "version": SEEING_VERSION,
                "params": dict(n_videos=n_videos, seed=seed, min_s=min_s, max_s=max_s),
                "questions": counts, "scenes": [scene_dict(sc) for sc in scenes]}
    (out_dir / "suite.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return counts
