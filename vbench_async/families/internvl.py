"""InternVL3 / InternVL3.5 (the transformers-format checkpoints, model_type "internvl"): one square tile per frame,
"Frame{i}: <img>...</img>" per frame in the prompt.

Reference: the InternVL3 model card's video example (`get_index`, `load_video(..., input_size=448, max_num=1,
num_segments=8)`): frames are the middles of `num_segments` equal segments of the window, each resized to the
vision tower's input size without tiling, each prefixed "FrameN: " in the prompt. The transformers processor and
vLLM (interns1.py) build that same prompt from pre-sampled frames.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .base import PRESAMPLED, Family, FrameRules, Handoff, Reference, VideoShape, side_from_config


def segment_middles(first: int, last: int, n: int) -> list[int]:
    """The card's get_index: int(first + seg/2 + round(seg * i)) with seg = (last - first) / n."""
    seg = float(last - first) / n
    return [int(first + seg / 2 + round(seg * i)) for i in range(n)]


class InternVLTokens:
    def __init__(self, processor: Any):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.seq = int(processor.image_seq_length)
        self.video_target = (self.tokenizer.convert_tokens_to_ids(processor.video_token),)
        self.image_id = int(processor.image_token_id)

    def video_tokens(self, video: VideoShape) -> int:
        return video.frames * self.seq

    @lru_cache(maxsize=1024)  # noqa: B019 - one instance per family, alive for the process anyway
    def _replacement(self, frames: int) -> int:
        p = self.processor
        text = "\n".join(f"Frame{i + 1}: {p.start_image_token}{p.image_token * self.seq}{p.end_image_token}"
                         for i in range(frames))
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def video_replacement(self, video: VideoShape) -> int:
        return self._replacement(video.frames)

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        patches = self.processor.image_processor.get_number_of_image_patches(height, width, {})
        return 2 + self.seq * patches  # <img> + context tokens + </img>


FAMILY = Family(
    name="internvl", model_types=("internvl",), aliases=("internvl3", "internvl3.5"),
    reference=Reference(
        source="model card", url="https://huggingface.co/OpenGVLab/InternVL3-8B#inference-with-transformers",
        follows="get_index (segment middles), load_video with max_num=1 (one tile per frame at input_size), "
                "'Frame{i}: <image>' per frame before the question"),
    frames=FrameRules(
        count="fps x duration within [min_frames, max_frames], or exactly nframes (the card's num_segments; "
              "its example uses 8); no pairing",
        selection="middle of each of n equal segments of the window (get_index)", pick=segment_middles,
        resize="fixed", default_side=448, temporal=1, timestamps="none ('FrameN:' labels only)"),
    handoff=Handoff(vllm_processor_kwargs=PRESAMPLED, hf_processor_kwargs=PRESAMPLED,
                    note="frames already at the tile size: the processor only normalises them"),
    chat="ChatML with InternVL's system prompt in the checkpoint template; a video is the <video> token, which the "
         "processor expands to 'Frame1: <img>..</img>\\nFrame2: ...'",
    tiny_model="tiny-internvl", visual_tokens=InternVLTokens, frame_settings=side_from_config,
)
