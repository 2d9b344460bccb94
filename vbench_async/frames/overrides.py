"""Frame settings a run may set over a benchmark's preset (each is part of the result config)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class FrameOverrides:
    """None keeps the benchmark card's value. The fields' `help` is their command-line text (`cli/options.py`)."""

    max_frames: int | None = field(default=None, metadata={
        "help": "frame cap per video (`run` takes several, 16,32,64: a frame-budget sweep, each budget in its own run "
                "directory OUTPUT_DIR/max_frames-N, each video decoded once for all of them)", "min": 1})
    nframes: int | None = field(default=None, metadata={"help": "exact frame count (Qwen2.5-style sampling)", "min": 1})
    fps: float | None = field(default=None, metadata={"help": "sampling rate in frames per second", "above": 0})
    max_pixels: int | None = field(default=None, metadata={"help": "per-frame pixel cap", "min": 1})
    total_pixels: int | None = field(default=None, metadata={"help": "per-video pixel budget", "min": 1})

    def to_dict(self) -> dict[str, int | float]:
        """The settings that are set, as `Benchmark.frame_spec` takes them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
