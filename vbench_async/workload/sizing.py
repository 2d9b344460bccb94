"""Engine settings from the plan: a context as long as the longest prompt plus the answer, and a multimodal budget
for the largest video the run will actually send.

vLLM refuses a prompt of max_model_len tokens or more, and a video whose embeddings exceed its encoder cache, which it
sizes from max_num_batched_tokens and from the dummy video it profiles with. So the sized engine takes
max_model_len = longest prompt + max_tokens + MARGIN (capped by the model's max_position_embeddings; an explicit
--max-model-len wins), a batched-token budget of at least the largest video's embeddings, and profiles with that
video's frame count and size.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..backends.vllm import UNPLANNED_MAX_MODEL_LEN as DEFAULT_MAX_MODEL_LEN  # nothing planned (no samples left)
from .tokens import ModelLimits

MARGIN = 64  # tokens above the longest prompt + max_tokens: room for a stop token, never a second video
ROUND = 256  # the sized context is a multiple of this (stable across runs whose prompts differ by a few tokens)
MIN_MAX_MODEL_LEN = 2048
SMALLEST_BATCH_DEFAULT = 2048  # vLLM's smallest default max_num_batched_tokens; below it the defaults suffice
TYPICAL_BATCH_DEFAULT = 8192
# Requests in flight on an in-process engine: what their frames may hold, as a share of the machine's memory, and a
# ceiling (a few thousand coroutines cost nothing; the ceiling keeps a 100k-question run's bookkeeping small).
IN_FLIGHT_MEMORY_SHARE = 0.25
MAX_IN_FLIGHT = 1024
# Bytes a request in flight holds per pixel value of its video: the frames (uint8, the pipeline's, shared by the
# questions of one video) and the processor's float32 copy the engine keeps until the request is scheduled.
IN_FLIGHT_BYTES_PER_VALUE = 1 + 4


@dataclass(frozen=True)
class EnginePlan:
    max_model_len: int
    source: str  # "explicit" (--max-model-len), "sized" (from the plan) or "default"
    needed: int  # longest prompt + max_tokens
    model_limit: int  # the checkpoint's max_position_embeddings
    max_num_batched_tokens: int | None  # None: vLLM's default is enough
    profile_video: tuple[int, int, int] | None  # (frames, height, width) of the largest video sent
    kv_bytes_per_token: int
    kv_bytes_per_sequence: int  # at the largest context
    kv_bytes_at_concurrency: int  # every request slot at the largest context (an upper bound)
    concurrency: int

    @property
    def fits_model(self) -> bool:
        return self.needed <= self.model_limit

    def to_dict(self) -> dict:
        return {**asdict(self), "fits_model": self.fits_model}

    def apply(self, settings: Any) -> None:
        """Set a backends.vllm.VLLMSettings from this plan (an explicit --max-model-len is already this one)."""
        settings.max_model_len = self.max_model_len
        if self.max_num_batched_tokens and not settings.max_num_batched_tokens:
            settings.max_num_batched_tokens = self.max_num_batched_tokens
        if self.profile_video:
            settings.profile_frames, settings.profile_height, settings.profile_width = self.profile_video
        # The CPU engine's KV cache is a fixed size: it must hold at least one sequence of the sized context.
        settings.min_kv_cache_bytes = int(self.max_model_len * self.kv_bytes_per_token * 1.1)


def size_engine(*, largest_prompt: int, largest_item: int, largest_video: tuple[int, int, int] | None,
                max_tokens: int, limits: ModelLimits, explicit_max_model_len: int | None,
                explicit_batched_tokens: int | None, concurrency: int) -> EnginePlan:
    needed = largest_prompt + max_tokens if largest_prompt else 0
    limit = limits.max_position_embeddings
    if explicit_max_model_len:
        length, source = explicit_max_model_len, "explicit"
    elif needed:
        length = max(MIN_MAX_MODEL_LEN, -(-(needed + MARGIN) // ROUND) * ROUND)
        length, source = min(length, limit), "sized"
    else:
        length, source = min(DEFAULT_MAX_MODEL_LEN, limit), "default"
    batched = explicit_batched_tokens
    if not batched and largest_item > SMALLEST_BATCH_DEFAULT:
        # The encoder cache must hold one whole video and defaults to max_num_batched_tokens (2,048 for vLLM's
        # server on a GPU): raise the budget to the largest video, never below a typical default.
        batched = max(largest_item, TYPICAL_BATCH_DEFAULT)
    context = min(length, max(needed, 1))
    per_token = limits.kv_bytes_per_token
    return EnginePlan(
        max_model_len=length, source=source, needed=needed, model_limit=limit, max_num_batched_tokens=batched,
        profile_video=largest_video, kv_bytes_per_token=per_token, kv_bytes_per_sequence=context * per_token,
        kv_bytes_at_concurrency=context * per_token * max(1, concurrency), concurrency=concurrency)


def requests_in_flight(*, running: int, largest_video: tuple[int, int, int] | None, pending: int,
                       memory_bytes: int | None) -> int:
    """How many requests an in-process engine is given at once: every pending one whose frames fit in a share of the
    memory, never fewer than the engine runs at once (`running`: max_num_seqs times the data-parallel replicas).

    More than the engine runs, because a request waiting in the engine's queue has had its frames processed while the
    engine computed: when a running sequence ends, the next is ready. With exactly `running` in flight the engine
    waited for the front end to process each replacement (perf/e2e.py, 120 questions on 2 cores: the loop took about
    1 s longer than with every request given at once, which is how the limit feeds the engine)."""
    if pending <= running:
        return running
    per_request = IN_FLIGHT_BYTES_PER_VALUE * 3 * largest_video[0] * largest_video[1] * largest_video[2] \
        if largest_video else 0
    fit = int((memory_bytes or 0) * IN_FLIGHT_MEMORY_SHARE) // per_request if per_request else MAX_IN_FLIGHT
    return max(running, min(pending, fit, MAX_IN_FLIGHT))


def machine_memory_bytes() -> int | None:
    """The memory this process may use: the machine's, or its cgroup's limit when lower (a container, a batch job)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
        break
    return total
