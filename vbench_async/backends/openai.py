"""Any OpenAI-compatible chat server (vLLM's API server, SGLang, hosted APIs) over HTTP.

Videos travel as the cached frames, not as a file for the server to re-sample: a `data:video/jpeg` URL holding one
base64 image per frame, with the source metadata (fps, frame indices, total frames) in `media_io_kwargs`, which vLLM's
server accepts per request. Frames are PNG-encoded (PIL reads them whatever the declared subtype), so the model sees
exactly the cached pixels; `mm_processor_kwargs` (do_resize=False) keeps the server from resizing them again, which
vLLM's server accepts when started with `--trust-request-mm-kwargs`.

Encoding is done once per video, in the pipeline's loader thread (`prepare_video`), not per question on the event
loop: the questions of one video share its encoded part. Each media part carries its `uuid` (the frame-cache key, or
the image's content hash), which vLLM's server accepts per item (`{"type": "video_url", ..., "uuid": ...}`) and uses
as the item's cache key, so its processor cache reuses a video's processed inputs across those questions.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EngineDead, SampleError, UserError
from ..failure_kinds import FailureKind
from ..redact import remember, scrub
from .base import CONCURRENCY, Completion, ImageInput, Request, VideoInput, explicit_sampling, system_turn

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def _png_b64(array: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG", compress_level=1)  # lossless; level 1 is fast
    return base64.b64encode(buf.getvalue()).decode()


def video_part(frames: np.ndarray, metadata: dict[str, Any], uuid: str | None = None
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The message part for a pre-sampled video, and the media_io_kwargs that carry its source metadata."""
    url = "data:video/jpeg;base64," + ",".join(_png_b64(f) for f in frames)
    io_kwargs = {
        "num_frames": -1,  # take every frame we send (the server default would keep only 32)
        "fps": float(metadata["fps"]),
        "frames_indices": [int(i) for i in metadata["frames_indices"]],
        # vLLM's server refuses more frames than the source has; a 1-frame source comes padded to the temporal patch
        # (2 frames). The count is not used once frames are sampled, so the padded count changes no token.
        "total_num_frames": max(int(metadata["total_num_frames"]), len(frames)),
        "duration": float(metadata["duration"]),
    }
    part: dict[str, Any] = {"type": "video_url", "video_url": {"url": url}}
    if uuid:
        part["uuid"] = uuid
    return part, io_kwargs


def image_part(pixels: np.ndarray, uuid: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _png_b64(pixels)}}
    if uuid:
        part["uuid"] = uuid
    return part


@dataclass(frozen=True)
class EncodedVideo(VideoInput):
    """A video with its message part already built (`OpenAIBackend.prepare_video`), shared by its questions."""

    part: dict[str, Any] = field(default_factory=dict)
    io_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EncodedImage(ImageInput):
    part: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerSettings:
    """Where the model is served and how patiently it is asked; the fields with a `help` are command-line flags."""

    base_url: str | None = field(default=None, metadata={"help": "server URL, e.g. http://127.0.0.1:8000/v1"})
    served_model: str | None = field(
        default=None, metadata={"help": "model name the server expects (default: the model evaluated)"})
    api_key: str | None = field(default=None, metadata={"help": "bearer token (default: $OPENAI_API_KEY or none)",
                                                        "secret": True})
    request_timeout: float = field(default=600.0, metadata={"help": "seconds per request"})
    max_retries: int = field(default=4, metadata={"help": "retries on 429/5xx/connection errors"})


class OpenAIBackend:
    name = "openai"

    def __init__(self, model: str, base_url: str, api_key: str | None = None, timeout_s: float = 600.0,
                 max_retries: int = 4, concurrency: int = CONCURRENCY, backoff_s: float = 0.5):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        remember(self.api_key)  # whatever reports this run (an error, a log line) must not repeat the key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._limit = asyncio.Semaphore(concurrency)  # per-server concurrency, whatever the pipeline asks
        self._client = None

    async def start(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=self.timeout_s)
        await self._check_served_model()

    async def _check_served_model(self) -> None:
        """Fail before the run, not with a 404 per sample, when the server lists its models and this is not one."""
        try:
            response = await self._client.get("/models", timeout=min(self.timeout_s, 30.0))
            served = [m.get("id") for m in response.json().get("data", [])] if response.status_code == 200 else []
        except Exception:  # noqa: BLE001 - no listing (down, or a server without /models): the requests will tell
            return
        if served and self.model not in served:
            await self.close()
            raise UserError(f"the server at {self.base_url} serves {', '.join(map(repr, served))}, not "
                            f"{self.model!r}: pass --served-model {served[0]}")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "base_url": scrub(self.base_url), "model": self.model,  # no URL password
                "timeout_s": self.timeout_s, "max_retries": self.max_retries}

    @staticmethod
    def prepare_video(video: VideoInput) -> EncodedVideo:
        """Encode a video's frames once (the pipeline calls this in a loader thread, once per group of questions)."""
        if isinstance(video, EncodedVideo):
            return video
        part, io_kwargs = video_part(video.frames, video.metadata, video.uuid)
        # The frames are not needed once encoded: the queue then holds the (smaller) PNG text, not both.
        return EncodedVideo(frames=_emptied(video.frames), metadata=video.metadata, uuid=video.uuid, part=part,
                            io_kwargs=io_kwargs)

    @staticmethod
    def prepare_image(image: ImageInput) -> EncodedImage:
        if isinstance(image, EncodedImage):
            return image
        return EncodedImage(pixels=_emptied(image.pixels), uuid=image.uuid, part=image_part(image.pixels, image.uuid))

    def payload(self, request: Request) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        io_kwargs: dict[str, Any] = {}
        for v in request.videos:
            encoded = self.prepare_video(v)  # already done by the loader, except for a caller outside the pipeline
            content.append(encoded.part)
            io_kwargs = encoded.io_kwargs
        for img in request.images:
            content.append(self.prepare_image(img).part)
        content.append({"type": "text", "text": request.prompt})
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [*system_turn(request.system), {"role": "user", "content": content}],
            "n": request.n,
            # Every sampling field, neutral ones included: a field left out is filled in by the server from the
            # checkpoint's generation_config (vLLM does so for repetition_penalty, top_k, min_p, ...).
            **explicit_sampling(s),
        }
        if io_kwargs:
            body["media_io_kwargs"] = {"video": io_kwargs}
            body["mm_processor_kwargs"] = {"do_resize": False, "do_sample_frames": False}
        return body

    async def generate(self, request: Request) -> Completion:
        import httpx

        if self._client is None:
            raise EngineDead("the HTTP client is not started")
        body = self.payload(request)
        last = ""
        async with self._limit:
            start = time.perf_counter()
            for attempt in range(self.max_retries + 1):
                if attempt:
                    # Exponential backoff with jitter, so many workers don't retry in lockstep.
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))
                try:
                    # httpx's timeout bounds each read, not the request: a server that trickles bytes would never
                    # time out without the overall limit. asyncio.timeout, not wait_for: Python 3.11's wait_for
                    # returns a response that lands in the same loop turn as a Ctrl-C and swallows the cancellation,
                    # so the worker went on sending requests after the signal and the run never ended.
                    async with asyncio.timeout(self.timeout_s):
                        resp = await self._client.post("/chat/completions", json=body)
                except (httpx.TimeoutException, httpx.TransportError, TimeoutError) as exc:
                    last = f"{type(exc).__name__}: {exc}" if str(exc) else f"no response within {self.timeout_s:g} s"
                    continue
                if resp.status_code in RETRY_STATUS:
                    last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                    continue
                if resp.status_code == 400 and "mm_processor_kwargs" in resp.text:
                    # A setup problem, not a sample problem: stop with the fix instead of failing every sample.
                    raise UserError(
                        "the server refuses per-request mm_processor_kwargs, which keep it from resizing the cached "
                        "frames again; start vLLM's server with --trust-request-mm-kwargs"
                    )
                if resp.status_code != 200:
                    raise SampleError(FailureKind.SERVER_ERROR, f"HTTP {resp.status_code}: {resp.text[:300]}")
                try:
                    return _completion(resp.json(), request.n, time.perf_counter() - start)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    raise SampleError(FailureKind.SERVER_ERROR,
                                      f"malformed response: {type(exc).__name__}: {exc}") from exc
        # Overload, timeouts, dropped connections: may pass, so the next run asks again (failure_kinds.py).
        raise SampleError(FailureKind.SERVER_UNAVAILABLE,
                          f"gave up after {self.max_retries + 1} attempts; last error: {last}")


def _emptied(array: np.ndarray) -> np.ndarray:
    """No pixels, same trailing shape: an encoded item holds no reference to its frames (a view would keep them)."""
    return np.empty((0, *array.shape[1:]), array.dtype)


def _completion(data: Any, n: int, latency_s: float) -> Completion:
    """A Completion from a chat-completions response body; TypeError/KeyError/... if it has another shape."""
    choices = data["choices"]
    if not isinstance(choices, list):
        raise TypeError(f"choices is a {type(choices).__name__}, not a list")
    usage = data.get("usage") or {}
    texts = [_text(c.get("message", {}).get("content")) for c in choices]
    return Completion(
        text=texts[0] if texts else "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=choices[0].get("finish_reason") if choices else None,
        latency_s=latency_s,
        engine_wait_s=latency_s,
        texts=texts if n > 1 else None,
    )


def _text(content: Any) -> str:
    """The answer text; a lone surrogate escape ("\\ud800", no character at all) becomes "?" so it can be stored."""
    text = "" if content is None else content if isinstance(content, str) else json.dumps(content)
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")
