"""GLM-4.1V-Thinking / GLM-4.5V: Qwen2-VL-style 14 px patches merged 2x2, frames in temporal pairs, and the integer
second of each pair written after its image tokens.

Reference: the GLM-V authors' processing as shipped in transformers (Glm4vVideoProcessor.sample_frames: 2 fps,
index ceil(i * source_fps / 2), an odd count padded with the last frame; Glm4vProcessor.replace_video_token:
"<|begin_of_image|>...<|end_of_image|>{int(seconds)}" per pair) and the model card's chat format.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping

from .base import PRESAMPLED, Family, FrameRules, Handoff, Reference, VideoShape

FACTOR = 28  # patch 14 x merge 2, checked against the checkpoint's config


def fps_ceil(first: int, last: int, n: int) -> list[int]:
    """ceil(i * count / n) from the window start: the reference's ceil(i * source_fps / fps) when n is
    duration x fps."""
    count = last - first + 1
    return [min(last, first + math.ceil(i * count / n)) for i in range(n)]


def check_config(config: Mapping[str, Any]) -> dict[str, Any]:
    vision = config.get("vision_config") or {}
    factor = int(vision.get("patch_size", 14)) * int(vision.get("spatial_merge_size", 2))
    if factor != FACTOR:
        raise ValueError(f"vision patch x merge is {factor}, the GLM-4.1V rules here assume {FACTOR}")
    return {}


class Glm4vTokens:
    def __init__(self, processor: Any):
        self.tokenizer = processor.tokenizer
        video = processor.video_processor
        self.patch, self.merge, self.temporal = int(video.patch_size), int(video.merge_size), int(
            video.temporal_patch_size)
        self.image_processor = processor.image_processor
        self.video_target = (int(processor.video_token_id),)
        self.image_id = int(processor.image_token_id)

    def frame_tokens(self, height: int, width: int) -> int:
        return (height // self.patch) * (width // self.patch) // self.merge**2

    def video_tokens(self, video: VideoShape) -> int:
        return math.ceil(video.frames / self.temporal) * self.frame_tokens(video.height, video.width)

    @lru_cache(maxsize=65536)  # noqa: B019 - one instance per family, alive for the process anyway
    def _second_len(self, second: int) -> int:
        return len(self.tokenizer.encode(str(second), add_special_tokens=False))

    def video_replacement(self, video: VideoShape) -> int:
        per_patch = self.frame_tokens(video.height, video.width)
        seconds = [int(i / video.fps) for i in video.indices[::self.temporal]]
        return sum(2 + per_patch + self._second_len(s) for s in seconds)

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        if resize:
            from transformers.models.glm4v.image_processing_glm4v import smart_resize

            size = self.image_processor.size
            height, width = smart_resize(self.temporal, height, width, temporal_factor=self.temporal,
                                         factor=self.patch * self.merge, min_pixels=size["shortest_edge"],
                                         max_pixels=size["longest_edge"])
        return (height // self.patch) * (width // self.patch) // self.merge**2


FAMILY = Family(
    name="glm-4.1v", model_types=("glm4v", "glm4v_moe"), aliases=("glm4v", "glm-4.5v"),
    reference=Reference(
        source="authors' evaluation code",
        url="https://github.com/huggingface/transformers/blob/main/src/transformers/models/glm4v/"
            "video_processing_glm4v.py",
        follows="sample_frames (2 fps, ceil(i * source_fps / fps), even count) and replace_video_token "
                "(integer second after each frame pair); chat format from the GLM-4.1V-9B-Thinking card"),
    frames=FrameRules(
        count="fps x duration (the reference's 2 fps) within [min_frames, max_frames], even; or exactly nframes",
        selection="ceil(i x window frames / n) from the window start", pick=fps_ceil,
        resize="smart", factor=FACTOR, temporal=2,
        timestamps="integer second of each frame pair after its <|end_of_image|>"),
    handoff=Handoff(vllm_processor_kwargs=PRESAMPLED, hf_processor_kwargs=PRESAMPLED,
                    note="(frames, metadata): the processor writes the timestamps from fps and frames_indices"),
    chat="[gMASK]<sop><|user|>\\n...<|assistant|>; a video is <|begin_of_video|><|video|><|end_of_video|>; "
         "thinking models answer after </think> inside <answer> tags",
    tiny_model="tiny-glm-4.1v", visual_tokens=Glm4vTokens, frame_settings=check_config,
)
