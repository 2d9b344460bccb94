"""LLaVA-OneVision (and LLaVA-Video, which shares its processor and model class): every frame at the SigLIP input
size, its patch grid pooled 2x2, one newline embedding after the whole video.

Reference: the authors' video inference code in LLaVA-NeXT (playground/demo/video_demo.py and the OneVision
tutorial's `load_video`): `np.linspace(0, total_frame_num - 1, max_frames_num, dtype=int)` frames, 32 in the
released evaluations, each resized to the vision tower's image size; no timestamps in the prompt (LLaVA-Video's
optional "time instruction" is not part of the default protocol).
"""

from __future__ import annotations

import math
from typing import Any

from .base import PRESAMPLED, Family, FrameRules, Handoff, Reference, VideoShape, side_from_config


def linspace_floor(first: int, last: int, n: int) -> list[int]:
    """numpy.linspace(first, last, n, dtype=int): truncated, as the authors' load_video."""
    import numpy as np

    return np.linspace(first, last, n, dtype=int).tolist()


class LlavaOnevisionTokens:
    def __init__(self, processor: Any):
        self.processor = processor
        grid = int(math.isqrt(int(processor.num_image_tokens)))
        self.per_frame = math.ceil(grid / 2) ** 2  # 2x2 bilinear pooling of the patch grid
        self.video_target = (int(processor.video_token_id),)
        self.image_id = int(processor.image_token_id)

    def video_tokens(self, video: VideoShape) -> int:
        return video.frames * self.per_frame + 1  # + the image_newline embedding

    def video_replacement(self, video: VideoShape) -> int:
        return self.video_tokens(video)

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        p = self.processor
        side = int(p.image_processor.size["height"])
        n = p._get_number_of_features(height, width, side, side)  # anyres tiling, as the processor counts it
        return n - 1 if p.vision_feature_select_strategy == "default" else n


FAMILY = Family(
    name="llava-onevision", model_types=("llava_onevision",), aliases=("llava_onevision", "llava-video"),
    reference=Reference(
        source="authors' evaluation code",
        url="https://github.com/LLaVA-VL/LLaVA-NeXT/blob/main/playground/demo/video_demo.py",
        follows="load_video: np.linspace(0, total-1, n, dtype=int) frames at the tower's image size; "
                "the video token before the question"),
    frames=FrameRules(
        count="exactly nframes when set, else fps x duration within [min_frames, max_frames] (32 frames in the "
              "authors' evaluations); no pairing",
        selection="numpy linspace(first, last, n) truncated to int", pick=linspace_floor,
        resize="fixed", default_side=384, temporal=1, timestamps="none"),
    handoff=Handoff(vllm_processor_kwargs=PRESAMPLED, hf_processor_kwargs=PRESAMPLED,
                    note="frames already at the tower's image size: the processor only normalises them"),
    chat="Qwen2 ChatML; the checkpoint template has no system prompt by default; a video is the <video> token "
         "followed by a newline, then the question",
    tiny_model="tiny-llava-onevision", visual_tokens=LlavaOnevisionTokens, frame_settings=side_from_config,
)
