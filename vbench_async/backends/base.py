"""The backend protocol: `Request` in, `Completion` out, whatever serves the model.

Backends own every engine-specific detail (vLLM's `(frames, metadata)` tuples and processor kwargs, the OpenAI message
format, HF processor calls). The pipeline and the trainer's rollouts speak only these types.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class VideoInput:
    """Pre-sampled, pre-resized frames and the metadata that says where they came from in the source video."""

    frames: np.ndarray  # uint8 (T, H, W, 3)
    metadata: dict[str, Any]  # fps (source), duration, total_num_frames, frames_indices, width, height
    uuid: str  # stable id (the frame-cache key): lets vLLM reuse processed inputs across requests


@dataclass(frozen=True)
class ImageInput:
    pixels: np.ndarray  # uint8 (H, W, 3)
    uuid: str


# Requests in flight unless a run says otherwise (RunConfig.concurrency): the one declaration of the default.
CONCURRENCY = 16

@dataclass(frozen=True)
class SamplingParams:
    """Greedy by default, so the same command gives the same outputs. (`help`: the command-line text.)"""

    temperature: float = field(default=0.0, metadata={"help": "sampling temperature; 0 is greedy", "min": 0})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling mass", "above": 0, "max": 1})
    top_k: int = field(default=0, metadata={"help": "0 disables top-k", "min": 0})
    max_tokens: int = field(default=256, metadata={"help": "maximum new tokens per answer", "min": 1})
    seed: int = field(default=0, metadata={"help": "sampling seed (recorded in the manifest)"})
    repetition_penalty: float = field(default=1.0, metadata={"help": "1.0 disables it", "above": 0})
    presence_penalty: float = field(default=0.0, metadata={"help": "0.0 disables it"})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explicit_sampling(s: SamplingParams) -> dict[str, Any]:
    """Every sampling field a server or checkpoint could otherwise fill in from its generation_config, with the run's
    value or the neutral one (top_k 0 = off, min_p 0, frequency_penalty 0): nothing is left to a default."""
    return {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "min_p": 0.0,
            "max_tokens": s.max_tokens, "seed": s.seed, "repetition_penalty": s.repetition_penalty,
            "presence_penalty": s.presence_penalty, "frequency_penalty": 0.0}


@dataclass(frozen=True)
class Request:
    request_id: str
    prompt: str  # the user's text; the backend applies the model's chat template around media + text
    videos: tuple[VideoInput, ...] = ()
    images: tuple[ImageInput, ...] = ()  # shown after the videos
    sampling: SamplingParams = field(default_factory=SamplingParams)
    n: int = 1  # samples per prompt (RL rollouts); evaluation uses 1
    # A system turn before the user's (an evaluation recipe's, e.g. lmms-eval's); None: none is sent, so the chat
    # template may add its own default.
    system: str | None = None


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0  # submit -> final output
    engine_wait_s: float = 0.0  # submit -> first output (queueing + prefill)
    texts: list[str] | None = None  # all n samples when n > 1
    token_ids: list[list[int]] | None = None  # per sample, when the backend can give them (RL)
    prompt_token_ids: list[int] | None = None  # the prompt as the engine tokenised it (media placeholders expanded)


class Backend(Protocol):
    name: str

    async def start(self) -> None: ...

    async def generate(self, request: Request) -> Completion:
        """Generate for one request. Per-request problems raise SampleError; a dead engine raises EngineDead."""
        ...

    async def close(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """Backend and engine settings for the run manifest."""
        ...


def messages_for(request: Request) -> list[dict[str, Any]]:
    """The chat messages the in-process backends render: the request's system turn, if any, then the user turn with
    the media first (video, then images), then the text."""
    return chat_messages(request.prompt, len(request.videos), len(request.images), request.system)


def chat_messages(prompt: str, n_videos: int = 0, n_images: int = 0, system: str | None = None
                  ) -> list[dict[str, Any]]:
    """`messages_for` from counts (the plan renders prompts before any frame is loaded)."""
    content: list[dict[str, Any]] = [{"type": "video"} for _ in range(n_videos)]
    content += [{"type": "image"} for _ in range(n_images)]
    content.append({"type": "text", "text": prompt})
    return [*system_turn(system), {"role": "user", "content": content}]


def system_turn(system: str | None) -> list[dict[str, Any]]:
    """The system message every backend sends before the user turn: one, plain text, or none (the openai backend's
    messages start with it too)."""
    return [{"role": "system", "content": system}] if system is not None else []


def array_uuid(array: np.ndarray) -> str:
    """Content id for an in-memory array (images that don't come from the frame cache)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(array.shape).encode())
    h.update(np.ascontiguousarray(array).data)
    return h.hexdigest()


class NoRequests:
    """The backend of a run with nothing to send: every pending sample failed before reaching an engine."""

    name = "none"

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def generate(self, request: Request) -> Completion:
        raise RuntimeError("no request was expected: every sample failed before reaching the engine")

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "reason": "every pending sample failed before reaching an engine"}
