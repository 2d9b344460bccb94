"""Qwen2-VL / Qwen2.5-VL M-RoPE positions as the model releases and vLLM compute them, for transformers models.

The text after an image or a video continues at the vision block's largest position + 1: the rule of the released
Qwen2-VL and Qwen2.5-VL code and of vLLM's `get_mrope_input_positions`. transformers 5.19's `get_rope_index`
continues at the block's start + max(h, w) / merge instead, which equals the rule for an image but not for a video
whose temporal positions run further (a 16-frame video at 2 fps: its positions reach 27, the next text token gets 7
in transformers and 28 in vLLM). So the `hf` backend and the trainer's forward would place the question after a video
elsewhere than vLLM, the rollouts and the model's own training did. `use_release_positions` swaps the method on the
loaded model (that instance only); the vision block's own positions stay transformers' (`get_vision_position_ids`,
which agrees with vLLM's). Later Qwen releases (Qwen3-VL) put a timestamp before every frame, so each frame is an
image-like block and both rules agree: those models are left as they are.
"""

from __future__ import annotations

import itertools
import types
from typing import Any

# The transformers classes whose `get_rope_index` continues after a video at start + max(h, w) / merge.
_FIXED = ("Qwen2VLModel", "Qwen2_5_VLModel")


def use_release_positions(model: Any) -> bool:
    """Give `model` (a transformers Qwen2-VL / Qwen2.5-VL model, the *ForConditionalGeneration or its inner model)
    the release's position rule. Returns whether it applied; any other model is left untouched."""
    inner = model if type(model).__name__ in _FIXED else getattr(model, "model", None)
    if type(inner).__name__ not in _FIXED:
        return False
    inner.get_rope_index = types.MethodType(release_rope_index, inner)
    return True


def release_rope_index(self: Any, input_ids: Any, mm_token_type_ids: Any, image_grid_thw: Any = None,
                       video_grid_thw: Any = None, second_per_grid_ts: Any = None, attention_mask: Any = None,
                       **kwargs: Any) -> tuple[Any, Any]:
    """(positions (3, B, L), deltas (B, 1)): `get_rope_index`'s contract, with the release's continuation rule."""
    import torch

    merge = self.config.vision_config.spatial_merge_size
    per_second = getattr(self.config.vision_config, "tokens_per_second", None)  # Qwen2-VL: none (interval 1)
    device = input_ids.device
    positions = torch.zeros(3, *input_ids.shape, dtype=input_ids.dtype, device=device)
    grids = {1: iter(image_grid_thw if image_grid_thw is not None else ()),
             2: iter(video_grid_thw if video_grid_thw is not None else ())}
    seconds = iter(second_per_grid_ts if second_per_grid_ts is not None else ())
    deltas = []
    for row in range(input_ids.shape[0]):
        kept = attention_mask[row].bool() if attention_mask is not None else torch.ones_like(input_ids[row]).bool()
        pieces, start = [], 0
        for kind, run in itertools.groupby(mm_token_type_ids[row][kept].tolist()):
            if kind == 0:  # text
                n = len(list(run))
                pieces.append(torch.arange(start, start + n, device=device).view(1, -1).expand(3, -1))
                start += n
                continue
            interval = per_second * next(seconds, 1.0) if kind == 2 and per_second is not None else 1
            block = self.get_vision_position_ids(start, next(grids[kind]), 1, merge, interval, device=device)
            pieces.append(block)
            start = int(block.max()) + 1  # the release's rule: after the block's largest position
        row_positions = torch.cat(pieces, dim=1)
        positions[:, row, kept] = row_positions.to(positions.dtype)
        deltas.append(start - int(kept.sum()))
    return positions, torch.tensor(deltas, device=device).unsqueeze(1)
