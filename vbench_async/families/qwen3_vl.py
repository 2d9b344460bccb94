"""Qwen3-VL (and Qwen3.5, which keeps its 16 px patches): factor 32, temporal pairs, "<t.t seconds>" per pair."""

from .base import Family
from .qwen_common import QWEN_HANDOFF, QWEN_REFERENCE, QwenTokens, qwen_frames

FAMILY = Family(
    name="qwen3-vl", model_types=("qwen3_vl", "qwen3_vl_moe"),
    aliases=("qwen3_vl", "qwen3vl", "qwen3.5-vl", "qwen3_5"),
    reference=QWEN_REFERENCE,
    frames=qwen_frames(32, '"<t.t seconds>" before each temporal patch (mean source time of its frames)'),
    handoff=QWEN_HANDOFF,
    chat="ChatML, no default system prompt; the processor expands a bare <|video_pad|> into timestamped groups",
    tiny_model="tiny-qwen3-vl", visual_tokens=lambda processor: QwenTokens(processor, timestamped=True),
)
