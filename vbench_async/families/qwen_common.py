"""What the three Qwen-VL families share: the qwen-vl-utils frame rules and vLLM's placeholder rules
(vllm/model_executor/models/qwen2_vl.py, qwen3_vl.py), which the engine applies to frames handed over with
`do_resize=False`, `do_sample_frames=False`:
- Qwen2-VL / Qwen2.5-VL: `<|video_pad|>` becomes (T / temporal_patch) * (H / patch) * (W / patch) / merge^2 tokens;
  an image's `<|image_pad|>` becomes (H / patch) * (W / patch) / merge^2 tokens.
- Qwen3-VL: per temporal patch, the tokens of "<t.t seconds>" (t: the mean source time of the patch's frames),
  `<|vision_start|>`, the patch's tokens, `<|vision_end|>`. The placeholder replaced is the bare `<|video_pad|>` when
  the processor overrides `replace_video_token` (transformers >= 5.10), else the
  `<|vision_start|><|video_pad|><|vision_end|>` triple, exactly as vLLM decides.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Sequence

from .base import PRESAMPLED, FrameRules, Handoff, Reference, VideoShape

QWEN_VL_UTILS = "https://github.com/QwenLM/Qwen2.5-VL/blob/main/qwen-vl-utils/src/qwen_vl_utils/vision_process.py"


def linspace_pick(first: int, last: int, n: int) -> list[int]:
    """round(linspace(first, last, n)) computed exactly as qwen-vl-utils does (torch float32, half to even)."""
    import torch

    return torch.linspace(first, last, n).round().long().tolist()


def qwen_frames(factor: int, timestamps: str) -> FrameRules:
    return FrameRules(
        count="fps x duration, clamped to [min_frames, max_frames], even (smart_nframes); or exactly nframes",
        selection="round(linspace(first, last, n)) over the window's frames", pick=linspace_pick,
        resize="smart", factor=factor, temporal=2, timestamps=timestamps,
    )


QWEN_REFERENCE = Reference(
    source="authors' evaluation code", url=QWEN_VL_UTILS,
    follows="smart_nframes, calculate_video_frame_range, smart_resize and fetch_video's per-video pixel budget",
)
QWEN_HANDOFF = Handoff(
    vllm_processor_kwargs=PRESAMPLED, hf_processor_kwargs=PRESAMPLED,
    note="(frames, metadata) with fps and frames_indices; temporal M-RoPE (2.5) and timestamps (3) come from them",
)


def timestamps(indices: Sequence[int], fps: float, temporal: int = 2) -> list[float]:
    """Seconds of each temporal patch (Qwen3-VL): the mean source time of its first and last frame, the last frame
    repeated to fill the final patch."""
    times = [i / fps for i in indices]
    times += [times[-1]] * (-len(times) % temporal)
    return [(times[i] + times[i + temporal - 1]) / 2 for i in range(0, len(times), temporal)]


class QwenTokens:
    """The Qwen-VL placeholder rules for one checkpoint's processor."""

    def __init__(self, processor: Any, timestamped: bool):
        from transformers import ProcessorMixin

        self.timestamped = timestamped
        self.tokenizer = processor.tokenizer
        video, image = processor.video_processor, processor.image_processor
        self.patch, self.merge, self.temporal = int(video.patch_size), int(video.merge_size), int(
            video.temporal_patch_size)
        self.image_patch, self.image_merge = int(image.patch_size), int(image.merge_size)
        size = image.size
        self.image_min_pixels = int(size.get("shortest_edge") or size.get("min_pixels") or 0)
        self.image_max_pixels = int(size.get("longest_edge") or size.get("max_pixels") or 0)
        ids = self.tokenizer.convert_tokens_to_ids
        self.video_id, self.image_id = ids("<|video_pad|>"), ids("<|image_pad|>")
        start, end = ids("<|vision_start|>"), ids("<|vision_end|>")
        # vLLM's own test (Qwen3VLMultiModalProcessor._expands_only_video_token).
        mixin_impl = getattr(ProcessorMixin, "replace_video_token", None)
        proc_impl = getattr(type(processor), "replace_video_token", None)
        bare = proc_impl is not None and proc_impl is not mixin_impl
        self.video_target: tuple[int, ...] = (self.video_id,) if not timestamped or bare else (start, self.video_id,
                                                                                               end)

    def frame_tokens(self, height: int, width: int) -> int:
        """Tokens of one temporal patch of a video frame of this size."""
        return (height // self.patch) * (width // self.patch) // self.merge**2

    def video_tokens(self, video: VideoShape) -> int:
        return math.ceil(video.frames / self.temporal) * self.frame_tokens(video.height, video.width)

    def video_replacement(self, video: VideoShape) -> int:
        if not self.timestamped:
            return self.video_tokens(video)
        per_patch = self.frame_tokens(video.height, video.width)
        return sum(self._timestamp_len(t) + 2 + per_patch for t in timestamps(video.indices, video.fps, self.temporal))

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        """`resize`: the engine's processor resizes the image again (it does when the request has no video, whose
        do_resize=False would cover images too)."""
        if resize:
            from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

            height, width = smart_resize(height, width, factor=self.image_patch * self.image_merge,
                                         min_pixels=self.image_min_pixels, max_pixels=self.image_max_pixels)
        return (height // self.image_patch) * (width // self.image_patch) // self.image_merge**2

    @lru_cache(maxsize=65536)  # noqa: B019 - one instance per family, alive for the process anyway
    def _timestamp_len(self, seconds: float) -> int:
        return len(self.tokenizer.encode(f"<{seconds:.1f} seconds>", add_special_tokens=False))
