"""`VideoMeta` and `CachedVideo`: sampled, resized frames plus everything a consumer needs to use them as-is."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..sample_result import FramesSeen

FORMAT_VERSION = "vbf1"  # bump when the entry layout or the sampling/resize code changes the frames

# Consumers hand these to vLLM / the HF processor so cached frames are neither re-sampled nor re-resized.
PROCESSOR_KWARGS = {"do_sample_frames": False, "do_resize": False}


@dataclass(frozen=True)
class VideoMeta:
    """Where the frames came from. Indices are absolute source frame numbers (a window does not shift them)."""

    fps: float  # source average fps
    total_num_frames: int  # source frames inside the window (the whole video without one)
    frames_indices: tuple[int, ...]  # source index of each cached frame, in order
    duration: float  # seconds covered by total_num_frames
    width: int  # source frame size
    height: int
    resized_height: int  # cached frame size
    resized_width: int
    source_total_frames: int  # whole video
    source_duration: float
    window: tuple[float, float | None] | None = None  # normalized (start, end) seconds
    window_frames: tuple[int, int] | None = None  # first and last source frame of the window
    requested_frames: int = 0  # frame count the rule asked for; more than len(frames_indices) when clamped
    decoder: str = ""
    decode_seconds: float = 0.0
    spec: Mapping[str, Any] = field(default_factory=dict)  # FrameSpec.key_fields() of the entry
    format: str = FORMAT_VERSION

    @property
    def num_frames(self) -> int:
        return len(self.frames_indices)

    @property
    def clamped(self) -> bool:
        """True when the video was shorter than the frame rule asked for (see FrameCount)."""
        return self.num_frames < self.requested_frames

    @property
    def sample_fps(self) -> float:
        """Effective sampling rate: what Qwen2.5-VL's second_per_grid_ts is derived from."""
        return self.num_frames / self.total_num_frames * self.fps

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["frames_indices"] = list(self.frames_indices)
        d["spec"] = dict(self.spec)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VideoMeta:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["frames_indices"] = tuple(int(i) for i in d["frames_indices"])
        for name in ("window", "window_frames"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        values["spec"] = dict(d.get("spec") or {})
        return cls(**values)


@dataclass(frozen=True, eq=False)
class CachedVideo:
    """Frames ready for the model: uint8 (T, H, W, 3), already sampled and resized, with their metadata."""

    key: str  # content-addressed cache key; use it as vLLM's multimodal uuid
    frames: np.ndarray
    meta: VideoMeta

    def hf_metadata(self) -> dict[str, Any]:
        """Metadata for vLLM's (frames, metadata) tuple and transformers' `video_metadata` (VideoMetadata fields)."""
        m = self.meta
        return {
            "fps": m.fps,
            "duration": m.duration,
            "total_num_frames": m.total_num_frames,
            "frames_indices": list(m.frames_indices),
            "width": m.width,
            "height": m.height,
            "video_backend": m.decoder,
        }

    def seen(self, source: Any = None) -> FramesSeen:
        """What a model given these frames receives, for the result line (`source`: the video file read)."""
        m = self.meta
        return FramesSeen(
            n=m.num_frames, indices=list(m.frames_indices),
            timestamps=[round(i / m.fps, 3) for i in m.frames_indices] if m.fps > 0 else [],
            size=[m.resized_height, m.resized_width], source_size=[m.height, m.width], fps=m.fps,
            duration=round(m.source_duration, 3), cache_key=self.key,
            window=list(m.window) if m.window is not None else None, requested=m.requested_frames,
            source=str(source) if source is not None else None)

    def processor_kwargs(self) -> dict[str, bool]:
        return dict(PROCESSOR_KWARGS)

    def timestamps(self, temporal_patch: int = 2) -> list[float]:
        """Seconds of each temporal patch, as Qwen3-VL prints them: mean source time of the patch's frames."""
        times = [i / self.meta.fps for i in self.meta.frames_indices]
        times += [times[-1]] * (-len(times) % temporal_patch)
        return [(times[i] + times[i + temporal_patch - 1]) / 2 for i in range(0, len(times), temporal_patch)]
