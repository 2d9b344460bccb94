"""Qwen2-VL: 14 px patches merged 2x2 (resize factor 28), frames in temporal pairs, no timestamps in the prompt."""

from .base import Family
from .qwen_common import QWEN_HANDOFF, QWEN_REFERENCE, QwenTokens, qwen_frames

FAMILY = Family(
    name="qwen2-vl", model_types=("qwen2_vl",), aliases=("qwen2_vl", "qwen2vl"),
    reference=QWEN_REFERENCE, frames=qwen_frames(28, "none"), handoff=QWEN_HANDOFF,
    chat="ChatML; the template adds the default system prompt; video as <|vision_start|><|video_pad|><|vision_end|>",
    tiny_model="tiny-qwen2-vl", visual_tokens=lambda processor: QwenTokens(processor, timestamped=False),
)
