"""Rollouts: n responses per prompt from the current policy, their rewards, and offline responses mixed in.

Requests are the evaluation pipeline's `Request`s (cached frames + source metadata, `do_sample_frames=False`), so a
rollout sees exactly what an evaluation sees. The CPU engine is transformers `generate` on a plain copy of the model
that receives the gathered full weights before each step (an FSDP module cannot generate: its parameters are
DTensors). On GPU the colocated vLLM engine in `vllm_rollout.py` plays the same role.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from dataclasses import dataclass, field
from typing import Any, ContextManager, Iterable, Protocol

import torch

from ..backends.base import Request
from ..errors import SampleError
from .config import RewardConfig
from .data import TrainItem

log = logging.getLogger(__name__)


@dataclass
class Sampled:
    """One sampled row as the engine returned it: token ids, and the engine's own log-prob of each one where the
    engine reports them (vLLM: at the sampling temperature), for the rollout/training mismatch correction."""

    token_ids: list[int]
    logprobs: list[float] | None = None
    prompt_tokens: int | None = None  # the prompt's length as the engine tokenised it (media expanded), if known


@dataclass
class Response:
    token_ids: list[int]  # up to and including the end-of-sequence token when the response finished
    text: str
    offline: bool = False
    finished: bool = True
    reward: float = 0.0
    accuracy: float = 0.0
    format: float = 0.0
    rollout_logp: list[float] | None = None  # the engine's log-probs of token_ids (None: not reported, offline)


@dataclass
class Group:
    """The n responses to one prompt; advantages are relative within the group."""

    item: TrainItem
    request: Request
    responses: list[Response] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    encoded: Any = None  # the prompt as the training forward consumes it (policy.Encoded)

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.responses]


class RolloutEngine(Protocol):
    kind: str  # the evaluation backend kind it matches (vllm, hf): what validation on it records
    processor: Any
    ids: SpecialIds  # end-of-sequence, pad and media placeholder token ids
    sync_dtype: torch.dtype  # the dtype the engine holds weights in: shards are cast to it before the gather

    def inputs(self, request: Request) -> Any:
        """The HF processor's encoding of a request's prompt (what the training forward consumes)."""

    def sync(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load the current policy weights (full tensors, by state-dict name)."""

    def generate(self, requests: list[Request]) -> list[list[Sampled] | None]:
        """Each request's n samples (None for a request the engine rejected)."""

    def held_awake(self) -> ContextManager[None]:
        """Several `generate` calls in a row (validation's batches) without the engine sleeping in between."""

    def close(self) -> None:
        """Release the engine (before the process group is destroyed)."""


def rollout_seed(seed: int, step: int, round_: int, index: int) -> int:
    """A sampling seed fixed by (run seed, step, refill round, dataset index): resumed runs sample the same."""
    return zlib.crc32(f"{seed}/{step}/{round_}/{index}".encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class SpecialIds:
    eos: frozenset[int]  # generation stops at any of these (generation_config, else the tokenizer's eos)
    pad: int | None
    media: frozenset[int]  # image / video placeholder tokens, never valid in a response


def trim(ids: list[int], ids_of: SpecialIds) -> tuple[list[int], bool]:
    """Cut a generated row after its first end-of-sequence token; drop right padding. Returns (ids, finished).

    A media placeholder token (image/video pad) ends the row before it, unfinished: the training forward would
    count it as a slot for visual features that do not exist.
    """
    for i, t in enumerate(ids):
        if t in ids_of.media:
            return ids[:i], False
        if t in ids_of.eos:
            return ids[: i + 1], True
    while ids and ids_of.pad is not None and ids[-1] == ids_of.pad:
        ids = ids[:-1]
    return ids, False


def special_ids(model_dir: str) -> SpecialIds:
    """The token ids that end, pad or must not appear in a response, read from a model directory."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    tok = AutoTokenizer.from_pretrained(model_dir)
    try:
        eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
    except OSError:
        eos = None
    eos = eos if eos is not None else tok.eos_token_id
    config = AutoConfig.from_pretrained(model_dir)
    media = {getattr(config, name, None) for name in ("image_token_id", "video_token_id")} - {None}
    return SpecialIds(frozenset(eos if isinstance(eos, (list, tuple)) else [eos]), tok.pad_token_id,
                      frozenset(media))


class HFRollout:
    """transformers `generate` through `HFBackend`, on weights synced from the FSDP model every step."""

    kind = "hf"

    def __init__(self, model_dir: str, device: torch.device):
        from ..backends.hf import HFBackend

        self.backend = HFBackend(model_dir, device=str(device))
        asyncio.run(self.backend.start())
        self.processor = self.backend.processor
        self.ids = special_ids(model_dir)
        self.sync_dtype = next(self.backend.model.parameters()).dtype  # what its weights are stored in

    def inputs(self, request: Request) -> Any:
        return self.backend.inputs(request)

    def sync(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        own = self.backend.model.state_dict()
        with torch.no_grad():
            for name, tensor in weights:
                own[name].copy_(tensor)

    def generate(self, requests: list[Request]) -> list[list[Sampled] | None]:
        async def run_all() -> list[list[Sampled] | None]:
            out: list[list[Sampled] | None] = []
            for req in requests:
                try:
                    completion = await self.backend.generate(req)
                except SampleError as exc:
                    log.warning("rollout of %s failed: %s", req.request_id, exc)
                    out.append(None)
                    continue
                out.append([Sampled(list(ids), prompt_tokens=completion.prompt_tokens)  # same weights: no log-probs
                            for ids in completion.token_ids or []])
            return out

        return asyncio.run(run_all())

    def held_awake(self) -> ContextManager[None]:
        return contextlib.nullcontext()  # never sleeps

    def close(self) -> None:
        asyncio.run(self.backend.close())


# ------------------------------------------------------------------------------------------------ groups


def make_responses(rows: list[Sampled], tokenizer: Any, ids_of: SpecialIds) -> list[Response]:
    out = []
    for row in rows:
        ids, finished = trim(list(row.token_ids), ids_of)
        logp = row.logprobs[: len(ids)] if row.logprobs is not None else None
        out.append(Response(ids, tokenizer.decode(ids, skip_special_tokens=True), finished=finished,
                            rollout_logp=logp))
    return out


def offline_responses(item: TrainItem, k: int, tokenizer: Any, eos_id: int, max_tokens: int) -> list[Response]:
    """k responses from the item's offline texts (cycled), tokenized and ended with EOS, cut to max_tokens."""
    out = []
    for j in range(k):
        text = item.offline[j % len(item.offline)]
        ids = tokenizer.encode(text, add_special_tokens=False)[: max_tokens - 1] + [eos_id]
        out.append(Response(ids, tokenizer.decode(ids, skip_special_tokens=True), offline=True))
    return out


def score(group: Group, cfg: RewardConfig) -> None:
    """Rewards of every response: the scorer library's `reward_parts`, unchanged (the evaluation metric + format)."""
    from ..scoring import reward_parts

    for r in group.responses:
        parts = reward_parts(group.item.sample, r.text, cfg.format_weight, format_mode=cfg.format_mode)
        r.reward, r.accuracy, r.format = parts["overall"], parts["accuracy"], parts["format"]


def mix_offline(group: Group, k: int, threshold: float | None, tokenizer: Any, eos_id: int, max_tokens: int,
                reward_cfg: RewardConfig) -> bool:
    """Put k offline responses into a scored group; returns True if it did.

    Unconditional mode (threshold None): the rollout generated n - k, the offline ones are appended. Gated mode:
    the group has n online responses; the last k are replaced only when their mean accuracy is below threshold.
    """
    if k == 0 or not group.item.offline:
        return False
    if threshold is not None:
        accuracy = sum(r.accuracy for r in group.responses) / len(group.responses)
        if accuracy >= threshold:
            return False
        group.responses = group.responses[: len(group.responses) - k]
    mixed = offline_responses(group.item, k, tokenizer, eos_id, max_tokens)
    scored = Group(group.item, group.request, mixed)
    score(scored, reward_cfg)
    group.responses.extend(scored.responses)
    return True
