"""Qwen2.5-VL: as Qwen2-VL (factor 28, temporal pairs); the frames' source times drive its temporal M-RoPE."""

from .base import Family
from .qwen_common import QWEN_HANDOFF, QWEN_REFERENCE, QwenTokens, qwen_frames

FAMILY = Family(
    name="qwen2.5-vl", model_types=("qwen2_5_vl",), aliases=("qwen2_5_vl", "qwen2.5vl", "qwen25-vl"),
    reference=QWEN_REFERENCE, frames=qwen_frames(28, "none (second_per_grid_ts from the metadata feeds M-RoPE)"),
    handoff=QWEN_HANDOFF,
    chat="ChatML; the template adds the default system prompt; video as <|vision_start|><|video_pad|><|vision_end|>",
    tiny_model="tiny-qwen2.5-vl", visual_tokens=lambda processor: QwenTokens(processor, timestamped=False),
)
