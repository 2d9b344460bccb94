"""Padding-free packing of a micro-batch: every row's real tokens, back to back, in one row of the model's input.

The padded layout (`policy.collate`) stays the source of truth; packing only removes its padding for the forward:

- tokens: the attended tokens of each row in row order, so the image/video placeholders appear in the same order
  as the vision features (`mm_encoder_outputs`) the model scatters into them;
- positions: M-RoPE's 3D positions are computed on the padded batch by the model's own `compute_3d_position_ids`
  (exactly what the padded forward uses) and the padding is dropped; text-only batches count from 0 per row.
  A fourth leading row holds plain per-row positions (0, 1, ... restarting at every row): Qwen-VL's text model reads
  that row as the packed-sequence boundaries, so attention never crosses from one row into another
  (`flash_attention_*`: varlen kernels over `cu_seq_lens`, passed explicitly; `sdpa`/`eager`: transformers builds a
  block-diagonal causal mask from those positions);
- logits: only at the positions that predict a response token (`logits_to_keep` as an index tensor), and the
  per-token results go back into the padded (B, R) layout by the response mask.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import UserError

VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3")  # transformers names with varlen (cu_seqlens) kernels


def resolve_attention(name: str, device: torch.device, half_precision: bool) -> str:
    """`train.attn_implementation` -> the name to load the model with (auto: flash-attention where it can run:
    CUDA, bf16 compute, the flash-attn package installed)."""
    if name != "auto":
        if name in VARLEN_ATTENTION and device.type != "cuda":
            raise UserError(f"train.attn_implementation {name!r} needs a CUDA GPU; use sdpa (or auto) here")
        return name
    flash = device.type == "cuda" and half_precision and importlib.util.find_spec("flash_attn") is not None
    return "flash_attention_2" if flash else "sdpa"


def attention_implementation(model: nn.Module) -> str:
    """The attention the text model runs ('sdpa', 'eager', 'flash_attention_2', ...)."""
    config = model.config
    text = getattr(config, "text_config", None) or config
    return getattr(text, "_attn_implementation", None) or getattr(config, "_attn_implementation", None) or "eager"


def packs_by_default(model: nn.Module) -> bool:
    """Pack where attention is varlen: padding then costs nothing anywhere. SDPA/eager would need a dense (T, T)
    block-diagonal mask over the packed length, more attention work than the padded batch when rows are alike."""
    return attention_implementation(model) in VARLEN_ATTENTION


@dataclass
class Packed:
    """The model inputs of one packed forward, and where its outputs go in the padded layout."""

    inputs: dict[str, Any]  # input_ids (1, T), position_ids (4, 1, T), logits_to_keep, [mm_token_type_ids, cu_seq_lens]
    targets: torch.Tensor  # (1, N): the response tokens, in row order
    response_mask: torch.Tensor  # (B, R) bool: where each of the N results belongs


def _positions_3d(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  token_types: torch.Tensor | None, grids: dict[str, torch.Tensor]) -> torch.Tensor:
    """(3, B, W) M-RoPE positions of the padded batch, as the HF forward computes them."""
    if token_types is not None and grids:
        grids = {"image_grid_thw": None, "video_grid_thw": None, **grids}  # (Qwen2.5-VL's have no defaults)
        positions = model.model.compute_3d_position_ids(input_ids=input_ids, inputs_embeds=None,
                                                        attention_mask=attention_mask, past_key_values=None,
                                                        mm_token_type_ids=token_types, **grids)
        if positions is not None:
            return positions
    text = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return text.unsqueeze(0).expand(3, -1, -1)


def pack(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, response_ids: torch.Tensor,
         token_types: torch.Tensor | None, grids: dict[str, torch.Tensor]) -> Packed:
    """The packed equivalent of a padded micro-batch (left-padded prompts, right-padded responses from column P)."""
    keep = attention_mask.bool()
    lengths = keep.sum(-1)
    R = response_ids.shape[1]
    P = input_ids.shape[1] - R
    response_mask = keep[:, P:]
    prompt_lengths = lengths - response_mask.sum(-1)
    starts = torch.cumsum(lengths, 0) - lengths
    # The logit at (prompt end - 1 + j) of a row predicts its j-th response token.
    offsets = torch.arange(R, device=input_ids.device).expand_as(response_mask)
    predicting = (starts + prompt_lengths - 1).unsqueeze(1) + offsets
    text = (attention_mask.long().cumsum(-1) - 1)[keep]
    positions = _positions_3d(model, input_ids, attention_mask, token_types, grids)[:, keep]
    inputs: dict[str, Any] = {
        "input_ids": input_ids[keep].unsqueeze(0),
        "position_ids": torch.cat([text.unsqueeze(0), positions]).unsqueeze(1),
        "logits_to_keep": predicting[response_mask],
    }
    if token_types is not None:
        inputs["mm_token_type_ids"] = token_types[keep].unsqueeze(0)
    if attention_implementation(model) in VARLEN_ATTENTION:  # boundaries given, not re-derived in every layer
        cu = torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)]).to(torch.int32)
        longest = int(lengths.max())
        inputs.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=longest, max_length_k=longest)
    return Packed(inputs, response_ids[response_mask].unsqueeze(0), response_mask)


def unpack(flat: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """(1, N) per-token values -> (B, R), zero where there is no response token; stays in the autograd graph."""
    out = flat.new_zeros(response_mask.shape).masked_scatter(response_mask, flat[0])
    return out if flat.numel() else out + 0.0 * flat.sum()
