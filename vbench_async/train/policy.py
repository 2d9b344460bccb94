"""The policy forward used for training: prompt + response tokens -> per-token log-probabilities.

Two things make it safe under FSDP with mixed-modality batches (docs/training.md, "Mixed modalities under FSDP"):
- the vision tower runs exactly ONCE per forward on every rank: the distinct images and videos of the micro-batch
  go through it together (the tower treats each grid item independently, so this equals separate calls; the n
  responses of a group share one encoding), and the results are handed to the HF model as `mm_encoder_outputs`;
- a rank whose micro-batch has no pixels runs the same single call on a zero-valued dummy input and adds
  0 * (every output, Qwen3-VL deepstack features included) to the loss, so every rank all-gathers and
  reduce-scatters the same parameters in the same order, and the gradients stay exact.
The text model then runs on the padded micro-batch or on the same rows packed without padding (train/packing.py).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .packing import pack, packs_by_default, unpack

MEDIA_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")
_MODEL_KEYS = ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")  # per-row inputs the HF forward takes


@dataclass
class Encoded:
    """One prompt as the processor encoded it (media tokens expanded), on the CPU."""

    input_ids: torch.Tensor  # (L,) long
    token_types: torch.Tensor | None  # (L,) mm_token_type_ids, when the processor returns them
    media: dict[str, torch.Tensor] = field(default_factory=dict)


def encode(processor_output: Mapping[str, Any]) -> Encoded:
    """Wrap the output of `HFBackend.inputs(request)` (a batch of one)."""
    types_ = processor_output.get("mm_token_type_ids")
    return Encoded(
        input_ids=processor_output["input_ids"][0].long(),
        token_types=types_[0].long() if types_ is not None else None,
        media={k: processor_output[k] for k in MEDIA_KEYS if processor_output.get(k) is not None},
    )


@dataclass
class MicroBatch:
    """Left-padded prompts followed by right-padded responses: every response starts at column P.

    `media` holds each distinct prompt's pixels once (the n responses of a group share them) plus, per row, the
    grids the model needs for positions and the index of every row's image/video items among the distinct ones.
    """

    input_ids: torch.Tensor  # (B, P + R)
    attention_mask: torch.Tensor  # (B, P + R)
    token_types: torch.Tensor | None
    media: dict[str, torch.Tensor]
    response_ids: torch.Tensor  # (B, R)
    response_mask: torch.Tensor  # (B, R) float, 1 on real response tokens

    def to(self, device: torch.device) -> MicroBatch:
        move = lambda t: t.to(device, non_blocking=True) if t is not None else None  # noqa: E731
        return MicroBatch(move(self.input_ids), move(self.attention_mask), move(self.token_types),
                          {k: move(v) for k, v in self.media.items()}, move(self.response_ids),
                          move(self.response_mask))


# (processor pixels key, processor grid key, short name)
_KINDS = (("pixel_values", "image_grid_thw", "image"), ("pixel_values_videos", "video_grid_thw", "video"))


def _collate_media(prompts: list[Encoded]) -> dict[str, torch.Tensor]:
    unique: dict[int, Encoded] = {}
    for p in prompts:
        unique.setdefault(id(p), p)
    media: dict[str, torch.Tensor] = {}
    for px_key, grid_key, kind in _KINDS:
        first_item: dict[int, int] = {}  # prompt -> index of its first item among the distinct items
        pixels, grids = [], []
        for key, p in unique.items():
            if px_key in p.media:
                first_item[key] = sum(len(g) for g in grids)
                pixels.append(p.media[px_key])
                grids.append(p.media[grid_key])
        if not pixels:
            continue
        media[f"{kind}_pixels"] = torch.cat(pixels)
        media[f"{kind}_grid_unique"] = torch.cat(grids)
        rows = [p for p in prompts if px_key in p.media]
        media[grid_key] = torch.cat([p.media[grid_key] for p in rows])  # per row: M-RoPE positions
        media[f"{kind}_index"] = torch.tensor(
            [first_item[id(p)] + j for p in rows for j in range(len(p.media[grid_key]))], dtype=torch.long)
    seconds = [p.media["second_per_grid_ts"] for p in prompts if "second_per_grid_ts" in p.media]
    if seconds:
        media["second_per_grid_ts"] = torch.cat(seconds)
    return media


def collate(prompts: list[Encoded], responses: list[list[int]], pad_id: int) -> MicroBatch:
    """Stack (prompt, response) pairs. Rows that share an `Encoded` object share its pixels."""
    if len(prompts) != len(responses) or not prompts:
        raise ValueError("collate needs one response per prompt and at least one pair")
    P = max(len(p.input_ids) for p in prompts)
    R = max(max(len(r) for r in responses), 1)
    B = len(prompts)
    ids = torch.full((B, P + R), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + R), dtype=torch.long)
    with_types = any(p.token_types is not None for p in prompts)
    ttypes = torch.zeros((B, P + R), dtype=torch.long) if with_types else None
    resp = torch.full((B, R), pad_id, dtype=torch.long)
    rmask = torch.zeros((B, R), dtype=torch.float32)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        n = len(p.input_ids)
        ids[i, P - n: P] = p.input_ids
        attn[i, P - n: P + len(r)] = 1
        if ttypes is not None and p.token_types is not None:
            ttypes[i, P - n: P] = p.token_types
        if r:
            ids[i, P: P + len(r)] = torch.tensor(r, dtype=torch.long)
            resp[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            rmask[i, : len(r)] = 1.0
    return MicroBatch(ids, attn, ttypes, _collate_media(prompts), resp, rmask)


# ------------------------------------------------------------------------------------------------ vision


def dummy_vision_input(visual: nn.Module, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero pixels of the smallest valid grid (1 x merge x merge patches) for this vision tower."""
    cfg = visual.config
    channels = getattr(cfg, "in_channels", None) or getattr(cfg, "in_chans", 3)
    temporal = getattr(cfg, "temporal_patch_size", 2)
    merge = getattr(visual, "spatial_merge_size", 2)
    patch_dim = channels * temporal * cfg.patch_size**2
    grid = torch.tensor([[1, merge, merge]], dtype=torch.long, device=device)
    return torch.zeros(merge * merge, patch_dim, device=device), grid


def _all_tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj] if obj.is_floating_point() else []
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _all_tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _all_tensors(v)]
    return []


def run_vision(model: nn.Module, media: Mapping[str, torch.Tensor], device: torch.device
               ) -> tuple[dict[str, Any] | None, torch.Tensor | None]:
    """One vision-tower call over the distinct images and videos of a micro-batch (a zero dummy when none).

    Returns (mm_encoder_outputs for the HF model, with every row's items, or None; a zero-valued term to add to the
    loss, or None).
    """
    visual = model.model.visual
    kinds = [kind for _, _, kind in _KINDS if f"{kind}_pixels" in media]
    if kinds:
        pixels = torch.cat([media[f"{k}_pixels"] for k in kinds])
        grid = torch.cat([media[f"{k}_grid_unique"] for k in kinds])
    else:
        pixels, grid = dummy_vision_input(visual, device)
    out = visual(pixels.to(visual.dtype), grid_thw=grid)
    if not kinds:
        # Every output (pooled tokens, deepstack features, hidden states) joins the graph with weight zero.
        return None, sum(t.float().sum() for t in _all_tensors(dict(out))) * 0.0
    sizes = (grid.prod(-1) // visual.spatial_merge_size**2).tolist()
    pooled = torch.split(out.pooler_output, sizes)
    deep = [torch.split(f, sizes) for f in (getattr(out, "deepstack_features", None) or [])]
    encoder_outputs: dict[str, Any] = {}
    offset = 0
    for kind in kinds:
        rows = [offset + int(i) for i in media[f"{kind}_index"].tolist()]  # distinct item of each row's item
        encoder_outputs[kind] = types.SimpleNamespace(
            pooler_output=tuple(pooled[i] for i in rows),
            deepstack_features=[tuple(d[i] for i in rows) for d in deep] or None,
        )
        offset += len(media[f"{kind}_grid_unique"])
    return encoder_outputs, None


class Policy(nn.Module):
    """Wraps a Qwen-VL `*ForConditionalGeneration`; the FSDP root, so all its collectives happen inside forward.

    `packing`: True runs the text model on the micro-batch packed without padding (train/packing.py), False on the
    padded batch, None (auto) packs where the attention implementation has varlen kernels (flash-attention)."""

    def __init__(self, model: nn.Module, packing: bool | None = None):
        super().__init__()
        self.model = model
        self.packed = packs_by_default(model) if packing is None else packing

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, response_ids: torch.Tensor,
                token_types: torch.Tensor | None = None, temperature: float = 1.0,
                with_entropy: bool = False, chunk: int = 512, **media: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(log-probs (B, R) of the response tokens, entropy (B, R) or None, zero-valued dummy term or None)."""
        encoder_outputs, zero = run_vision(self.model, media, input_ids.device)
        grids = {k: v for k, v in media.items() if k in _MODEL_KEYS}
        if self.packed:
            packed = pack(self.model, input_ids, attention_mask, response_ids, token_types, grids)
            out = self.model(**packed.inputs, mm_encoder_outputs=encoder_outputs, use_cache=False)
            logp, entropy = _per_token(out.logits, packed.targets, temperature, with_entropy, chunk)
            return (unpack(logp, packed.response_mask),
                    unpack(entropy, packed.response_mask) if with_entropy else None, zero)
        kwargs: dict[str, Any] = dict(grids)
        if token_types is not None:
            kwargs["mm_token_type_ids"] = token_types
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, mm_encoder_outputs=encoder_outputs,
                         use_cache=False, logits_to_keep=response_ids.shape[1] + 1, **kwargs)
        logp, entropy = _per_token(out.logits[:, :-1], response_ids, temperature, with_entropy, chunk)
        return logp, entropy, zero


def _per_token(logits: torch.Tensor, ids: torch.Tensor, temperature: float, with_entropy: bool, chunk: int
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropy) of `ids` under `logits` (..., L, V), `chunk` positions of dim 1 at a time."""
    logp, entropy = [], []
    for start in range(0, max(ids.shape[1], 1), chunk):
        part, target = logits[:, start: start + chunk], ids[:, start: start + chunk]
        if torch.is_grad_enabled():  # backward recomputes the fp32 chunk instead of keeping every chunk's
            logp.append(checkpoint(_token_logprobs, part, target, temperature, use_reentrant=False))
        else:
            logp.append(_token_logprobs(part, target, temperature))
        if with_entropy:
            with torch.no_grad():
                entropy.append(_entropy(part, temperature))
    return torch.cat(logp, 1), torch.cat(entropy, 1) if with_entropy else None


def _token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / T)[ids] of one chunk, in fp32 (the distribution the rollouts sampled from)."""
    x = logits.float()
    if temperature != 1.0:
        x = x / temperature
    return x.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(x, dim=-1)


def _entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def forward_batch(policy: nn.Module, batch: MicroBatch, temperature: float, with_entropy: bool = False,
                  chunk: int = 512):
    """Call the (possibly FSDP-wrapped) policy on a micro-batch; log-softmax over `chunk` positions at a time."""
    return policy(input_ids=batch.input_ids, attention_mask=batch.attention_mask, response_ids=batch.response_ids,
                  token_types=batch.token_types, temperature=temperature, with_entropy=with_entropy, chunk=chunk,
                  **batch.media)
