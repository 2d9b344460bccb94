"""`FrameSettings`: every frame setting a user may choose, declared once with its help and bounds.

The one record the command line (`cli/options.py` makes a flag of each field), a benchmark card's `frames:` and its
presets (`benchmarks/cards.py`), a server job's and training validation's `frame_overrides` (`RunConfig`), and
training's `data.frames` read; `settings.py` checks the bounds the same way for each, so one bad value is refused
with one message wherever it is given. None is "not set here": the next layer's value holds (card, then checkpoint,
then the user: `spec.resolve_frame_spec`), and `FrameSpec` fills what is left with the family's defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..settings import bounds_error, from_json

# Caps far above any real setting (a server job must not stall its queue or the machine with one).
_FRAMES = {"min": 1, "max": 4096}
_FRAME_PIXELS = {"min": 1, "max": 1 << 26}  # one frame or image: 8K is 1 << 25
_VIDEO_PIXELS = {"min": 1, "max": 1 << 34}  # one video, all its frames


@dataclass(frozen=True)
class FrameSettings:
    """Frame settings over a benchmark's preset; None keeps the layer below's value. A field's `help` is its flag's
    text, `min`/`max`/`above` its bounds (`settings.bounds_error`), `flag` a flag name other than --field-name."""

    max_frames: int | None = field(default=None, metadata={
        "help": "frame cap per video (`run` takes several, 16,32,64: a frame-budget sweep, each budget in its own run "
                "directory OUTPUT_DIR/max_frames-N, each video decoded once for all of them)", **_FRAMES})
    min_frames: int | None = field(default=None, metadata={
        "help": "frame floor per video when sampling at --fps (qwen-vl-utils' FPS_MIN_FRAMES; default 4)",
        **_FRAMES})
    nframes: int | None = field(default=None, metadata={
        "help": "exact frame count (Qwen2.5-style sampling)", **_FRAMES})
    fps: float | None = field(default=None, metadata={
        "help": "sampling rate in frames per second", "above": 0, "max": 1000})
    min_pixels: int | None = field(default=None, metadata={
        "help": "per-frame pixel floor (default: 128 tokens, e.g. 128x32x32 for Qwen3-VL; lowered to --max-pixels "
                "when that is lower)", **_FRAME_PIXELS})
    max_pixels: int | None = field(default=None, metadata={"help": "per-frame pixel cap", **_FRAME_PIXELS})
    total_pixels: int | None = field(default=None, metadata={"help": "per-video pixel budget", **_VIDEO_PIXELS})
    image_min_pixels: int | None = field(default=None, metadata={
        "help": "pixel floor of a still image (default: 4 tokens)", **_FRAME_PIXELS})
    image_max_pixels: int | None = field(default=None, metadata={
        "help": "pixel cap of a still image (default: 16384 tokens)", **_FRAME_PIXELS})
    second_resize_max_pixels: int | None = field(default=None, metadata={
        "help": "the engine processor's second resize, as Qwen3-VL's own evaluation leaves it on: frames x height x "
                "width of a video at most this many pixels, the frames resized again to fit (Qwen3-VL's video "
                "processor size.longest_edge: 25165824 for Qwen3-VL-8B; default: off, no second resize)",
        **_VIDEO_PIXELS})
    side: int | None = field(default=None, metadata={
        "flag": "--frame-side", "help": "fixed-size families (InternVL, LLaVA-OneVision): the square frame side "
                                        "(default: the checkpoint's vision input size)", "min": 1, "max": 4096})

    def to_dict(self) -> dict[str, int | float]:
        """The settings that are set (FrameSpec keyword arguments)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def over(self, base: FrameSettings) -> FrameSettings:
        """`base` with this record's set values in place of its own."""
        return dataclasses.replace(base, **self.to_dict())

    @classmethod
    def read(cls, data: FrameSettings | Mapping[str, Any] | None, where: str = "") -> FrameSettings:
        """A record from its JSON/YAML form (UserError naming `where` and the field for an unknown field, a wrong type
        or a value out of bounds); a record is returned as it is, None is the empty record."""
        if isinstance(data, cls):
            return data
        if data is None:
            return cls()
        return from_json(cls, data, where)


def bound_problem(name: str, value: Any) -> str | None:
    """Why `value` breaks FrameSettings.`name`'s declared bounds (None if it does not): for a flag whose own parser
    reads several values (`run --max-frames 16,32,64`)."""
    return bounds_error(FIELDS[name], value)


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(FrameSettings)}
