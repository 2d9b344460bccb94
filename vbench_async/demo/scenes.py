"""Random (seeded) scene plans: which shapes move, flash and appear, and which text is shown when.

Layout rules keep the ground truth unambiguous: every shape has its own kind and colour, shapes never overlap each
other, and captions live in a band at the bottom that shapes never enter. Timing rules keep events visible at the
frame rates evaluations sample (see `_flashing_shape`).
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np

from .videos import COLORS, SHAPES, Caption, Scene, Shape, text_plate_size

_WORDS = ("CAT", "SUN", "BOX", "MAP", "JET", "OWL", "KEY", "FOX", "CUP", "ZIP", "HAT", "BUS")
_BACKGROUNDS = ((40, 40, 52), (30, 46, 40), (48, 36, 36), (36, 36, 60))
_DIRECTIONS = ("left", "right", "up", "down")


def plan_scene(rng: np.random.Generator, name: str, width: int, height: int, fps: Fraction,
               duration: float) -> Scene:
    """A scene with one to three moving shapes (the first on screen for only part of the video when it is long
    enough), one flashing shape, and one caption shown for part of the video."""
    n = max(4, round(duration * fps))
    text = f"{rng.choice(_WORDS)} {int(rng.integers(10, 100))}"
    scale = 2 if text_plate_size(text, 2)[0] <= width - 8 else 1
    plate_w, plate_h = text_plate_size(text, scale)
    band = plate_h + 4  # shapes stay above this band
    area_h = height - band
    size = max(10, int(min(width, area_h) * rng.uniform(0.18, 0.24)))
    n_moving = int(rng.integers(1, 3)) + (1 if width * area_h >= 200 * 100 else 0)  # a third one if there is room
    colors = [str(c) for c in rng.permutation(list(COLORS))[: n_moving + 1]]
    kinds = [str(k) for k in rng.permutation(list(SHAPES))[: n_moving + 1]]
    fps_f = float(fps)

    for _attempt in range(200):
        moving = [
            _moving_shape(rng, kinds[i], colors[i], size, width, area_h, n, fps_f, partial=(i == 0))
            for i in range(n_moving)
        ]
        flashing = _flashing_shape(rng, kinds[-1], colors[-1], size, width, area_h, n, fps_f)
        shapes = (*moving, flashing)
        if not _overlap(shapes, n):
            break
    else:  # pragma: no cover - 200 failures would mean the layout rules are wrong for this size
        raise RuntimeError(f"could not place non-overlapping shapes in a {width}x{height} frame")

    first, last = _interval(rng, n, fps_f, min_len_s=1.0, share=(0.3, 0.8))
    x = int(rng.integers(2, max(3, width - plate_w - 1)))
    caption = Caption(text=text, first=first, last=last, xy=(x, height - plate_h - 2), scale=scale)
    background = _BACKGROUNDS[int(rng.integers(len(_BACKGROUNDS)))]
    return Scene(name=name, width=width, height=height, fps=fps, num_frames=n, background=background,
                 shapes=shapes, captions=(caption,))


def _interval(rng: np.random.Generator, n: int, fps: float, min_len_s: float,
              share: tuple[float, float]) -> tuple[int, int]:
    """A random inclusive frame interval covering `share` of the video, at least `min_len_s` long (if it fits)."""
    lo = min(n, max(round(min_len_s * fps), round(share[0] * n)))
    hi = max(lo, min(n, round(share[1] * n)))
    length = int(rng.integers(lo, hi + 1))
    start = int(rng.integers(0, n - length + 1))
    return start, start + length - 1


def _moving_shape(rng: np.random.Generator, kind: str, color: str, size: int, width: int, area_h: int, n: int,
                  fps: float, partial: bool) -> Shape:
    direction = _DIRECTIONS[int(rng.integers(4))]
    horizontal = direction in ("left", "right")
    room = (width if horizontal else area_h) - size  # travel range along the axis of motion
    travel = int(rng.integers(max(1, room // 2), room + 1))
    a = int(rng.integers(0, room - travel + 1))
    b = a + travel
    if direction in ("left", "up"):
        a, b = b, a
    cross = int(rng.integers(0, (area_h if horizontal else width) - size + 1))  # fixed other coordinate
    start, end = ((a, cross), (b, cross)) if horizontal else ((cross, a), (cross, b))
    if partial and n / fps >= 3:
        interval = _interval(rng, n, fps, min_len_s=1.2, share=(0.25, 0.7))
    else:
        interval = (0, n - 1)
    return Shape(kind=kind, color=color, size=size, intervals=(interval,), start=start, end=end)


def _flashing_shape(rng: np.random.Generator, kind: str, color: str, size: int, width: int, area_h: int, n: int,
                    fps: float) -> Shape:
    # On and off phases last >= 0.6 s and >= 1/24 of the video, so sampling at 2 fps, or 24+ frames uniformly,
    # sees every flash and every gap.
    on = gap = max(round(0.6 * fps), n // 24)
    most = max(1, min(6, (n - gap) // (on + gap)))
    count = int(rng.integers(1, most + 1))
    slot = n // count
    intervals = []
    for k in range(count):  # one flash per equal slot, off at both slot edges so flashes never touch
        lo = k * slot + gap // 2
        hi = max(lo, (k + 1) * slot - on - gap // 2)
        s = int(rng.integers(lo, hi + 1))
        intervals.append((s, min(n - 1, s + on - 1)))
    xy = (int(rng.integers(0, width - size + 1)), int(rng.integers(0, area_h - size + 1)))
    return Shape(kind=kind, color=color, size=size, intervals=tuple(intervals), start=xy, end=xy)


def _overlap(shapes: tuple[Shape, ...], n: int, margin: int = 3) -> bool:
    """True if any two shapes come within `margin` pixels of each other on a frame where both are drawn."""
    frames = np.arange(n)
    for s1, s2 in combinations(shapes, 2):
        both = s1.visible_mask(n) & s2.visible_mask(n)
        if not both.any():
            continue
        b1, b2 = s1.boxes(frames[both]), s2.boxes(frames[both])
        close = ((b1[:, 0] < b2[:, 2] + margin) & (b2[:, 0] < b1[:, 2] + margin)
                 & (b1[:, 1] < b2[:, 3] + margin) & (b2[:, 1] < b1[:, 3] + margin))
        if close.any():
            return True
    return False
