"""Synthetic videos: a scene description, its exact ground truth, and a renderer to H.264 mp4.

A `Scene` says everything that is drawn (shapes with their visible frame intervals and straight-line motion, text
captions). The same functions that place pixels answer ground-truth questions (visible span, box at a frame), so the
annotations cannot disagree with the video. Frames are drawn with numpy; text uses PIL's built-in bitmap font.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Iterator

import numpy as np

# Saturated, well-separated colours: they survive yuv420p chroma subsampling and stay nameable.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (50, 90, 240),
    "yellow": (240, 220, 40),
    "white": (245, 245, 245),
    "purple": (170, 60, 230),
    "orange": (250, 140, 20),
    "cyan": (40, 220, 230),
}
SHAPES = ("circle", "square", "triangle", "diamond")
TEXT_COLOR = (255, 255, 255)
PLATE_COLOR = (0, 0, 0)
FONT_CELL = (6, 11)  # width, height of one glyph cell of PIL's bitmap font
Box = tuple[int, int, int, int]  # x1, y1, x2, y2 in source pixels; x2/y2 are the right/bottom edges


@dataclass(frozen=True)
class Shape:
    """A filled shape of side `size`, visible during `intervals` (inclusive frame ranges), moving in a straight line
    from top-left `start` (first visible frame) to `end` (last visible frame)."""

    kind: str
    color: str
    size: int
    intervals: tuple[tuple[int, int], ...]
    start: tuple[int, int]
    end: tuple[int, int]

    @property
    def first(self) -> int:
        return self.intervals[0][0]

    @property
    def last(self) -> int:
        return self.intervals[-1][1]

    @property
    def label(self) -> str:
        return f"{self.color} {self.kind}"

    def visible(self, frame: int) -> bool:
        return any(a <= frame <= b for a, b in self.intervals)

    def box(self, frame: int) -> Box | None:
        """Exact bounding box at `frame`, or None when the shape is not drawn there."""
        if not self.visible(frame):
            return None
        x1, y1, x2, y2 = self.boxes(np.array([frame]))[0].tolist()
        return (x1, y1, x2, y2)

    def boxes(self, frames: np.ndarray) -> np.ndarray:
        """Boxes (k, 4) along the straight-line path at `frames`, whether or not the shape is drawn there."""
        span = self.last - self.first
        t = (frames - self.first) / span if span else np.zeros(len(frames))
        xy = np.rint(np.asarray(self.start) + np.outer(t, np.subtract(self.end, self.start))).astype(np.int64)
        return np.concatenate([xy, xy + self.size], axis=1)

    def visible_mask(self, n: int) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        for a, b in self.intervals:
            mask[a : b + 1] = True
        return mask

    @property
    def direction(self) -> str | None:
        """"left"/"right"/"up"/"down" along the dominant axis of motion, None for a static shape."""
        dx, dy = self.end[0] - self.start[0], self.end[1] - self.start[1]
        if dx == dy == 0:
            return None
        if abs(dx) >= abs(dy):
            return "right" if dx > 0 else "left"
        return "down" if dy > 0 else "up"


@dataclass(frozen=True)
class Caption:
    """Text drawn white on a black plate at `xy` (top-left of the plate), glyphs scaled by `scale`."""

    text: str
    first: int
    last: int
    xy: tuple[int, int]
    scale: int

    def visible(self, frame: int) -> bool:
        return self.first <= frame <= self.last

    @property
    def box(self) -> Box:
        w, h = text_plate_size(self.text, self.scale)
        return (self.xy[0], self.xy[1], self.xy[0] + w, self.xy[1] + h)


@dataclass(frozen=True)
class Scene:
    name: str
    width: int
    height: int
    fps: Fraction
    num_frames: int
    background: tuple[int, int, int]
    shapes: tuple[Shape, ...]
    captions: tuple[Caption, ...]

    @property
    def duration(self) -> float:
        return float(self.num_frames / self.fps)

    def seconds(self, frame: int) -> float:
        """Start time of `frame` in seconds."""
        return float(frame / self.fps)

    def frame_at(self, seconds: float) -> int:
        """The frame shown at time `seconds` (clamped to the video)."""
        return min(self.num_frames - 1, max(0, int(seconds * self.fps + 1e-9)))

    def span(self, first: int, last: int) -> tuple[float, float]:
        """Seconds from the start of frame `first` to the end of frame `last`, rounded to milliseconds."""
        return (round(self.seconds(first), 3), round(self.seconds(last + 1), 3))

    def boxes_per_second(self, shape: Shape) -> dict[str, list[int]]:
        """STVG-style boxes: one per integer second at which `shape` is on screen, keyed by the second."""
        out = {}
        for sec in range(int(self.duration) + 1):
            if sec * self.fps >= self.num_frames:
                break
            box = shape.box(self.frame_at(sec))
            if box is not None:
                out[str(sec)] = list(box)
        return out


def text_plate_size(text: str, scale: int) -> tuple[int, int]:
    return (len(text) * FONT_CELL[0] * scale + 4, FONT_CELL[1] * scale + 2)


@cache
def _text_mask(text: str, scale: int) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default_imagefont()  # bitmap font bundled with Pillow: no font files needed
    img = Image.new("L", (len(text) * FONT_CELL[0], FONT_CELL[1]))
    ImageDraw.Draw(img).text((0, 0), text, fill=255, font=font)
    mask = np.asarray(img) > 127
    return mask.repeat(scale, axis=0).repeat(scale, axis=1)


@cache
def _shape_mask(kind: str, size: int) -> np.ndarray:
    c = (size - 1) / 2
    y, x = np.mgrid[0:size, 0:size]
    if kind == "circle":
        return (x - c) ** 2 + (y - c) ** 2 <= (size / 2) ** 2
    if kind == "square":
        return np.ones((size, size), dtype=bool)
    if kind == "diamond":
        return np.abs(x - c) + np.abs(y - c) <= size / 2
    if kind == "triangle":  # apex at the top centre, base along the bottom row
        return np.abs(x - c) <= (y + 1) / 2
    raise ValueError(f"unknown shape kind {kind!r}; known: {', '.join(SHAPES)}")


def _paint(frame: np.ndarray, mask: np.ndarray, x: int, y: int, color: tuple[int, int, int]) -> None:
    h, w = mask.shape
    frame[y : y + h, x : x + w][mask] = color


def _background(scene: Scene) -> np.ndarray:
    # A gentle vertical gradient, so the frame is not a single flat colour.
    ramp = np.linspace(0.7, 1.15, scene.height)[:, None, None]
    bg = np.clip(np.asarray(scene.background, dtype=np.float32)[None, None, :] * ramp, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(np.broadcast_to(bg, (scene.height, scene.width, 3)))


def render_frames(scene: Scene) -> Iterator[np.ndarray]:
    """Yield every frame as uint8 (H, W, 3) RGB."""
    background = _background(scene)
    frames = np.arange(scene.num_frames)
    paths = [(s.boxes(frames).tolist(), s.visible_mask(scene.num_frames), _shape_mask(s.kind, s.size), COLORS[s.color])
             for s in scene.shapes]
    for i in range(scene.num_frames):
        frame = background.copy()
        for boxes, visible, mask, color in paths:
            if visible[i]:
                _paint(frame, mask, boxes[i][0], boxes[i][1], color)
        for cap in scene.captions:
            if cap.visible(i):
                x1, y1, x2, y2 = cap.box
                frame[y1:y2, x1:x2] = PLATE_COLOR
                _paint(frame, _text_mask(cap.text, cap.scale), x1 + 2, y1 + 1, TEXT_COLOR)
        yield frame


def write_mp4(scene: Scene, path: Path, crf: int = 18) -> None:
    """Encode the scene as H.264 (yuv420p) with PyAV's bundled libx264.

    One encoder thread, a fixed GOP and no macroblock tree, so the same scene gives the same bytes every time; callers
    get parallelism by encoding several videos at once (PyAV releases the GIL while encoding). The macroblock tree
    (x264's lookahead rate control) is off because its AVX-512 code gives other bytes from run to run on CPUs that
    have AVX-512, even on one thread (PyAV 18.1's libx264: 26 distinct files for the demo's 22 videos over three
    generations; with the tree off, or with x264 held to AVX2, one file each).
    """
    import av

    if scene.width % 2 or scene.height % 2:
        raise ValueError(f"yuv420p needs even sizes, got {scene.width}x{scene.height}")
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=scene.fps)
        stream.width, stream.height, stream.pix_fmt = scene.width, scene.height, "yuv420p"
        keyint = max(1, round(2 * scene.fps))  # a keyframe every ~2 s keeps seeking cheap
        stream.options = {"crf": str(crf), "preset": "veryfast", "threads": "1",
                          "x264-params": f"keyint={keyint}:min-keyint={keyint}:scenecut=0:mbtree=0"}
        for i, rgb in enumerate(render_frames(scene)):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
