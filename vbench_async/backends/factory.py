"""The one place a backend is built from its kind and settings (evaluation runs and judge passes alike)."""

from __future__ import annotations

from ..errors import UserError
from .base import Backend
from .openai import OpenAIBackend, ServerSettings
from .vllm import VLLMBackend, VLLMSettings

BACKENDS = ("vllm", "openai", "hf")


def make_backend(kind: str, model_path: str, engine: VLLMSettings | None = None,
                 server: ServerSettings | None = None, concurrency: int = 16) -> Backend:
    """`kind`: vllm (in-process AsyncLLM, `engine`), openai (a server, `server`; at most `concurrency` requests in
    flight) or hf (transformers). Building starts nothing: `await backend.start()` does."""
    if kind == "vllm":
        return VLLMBackend(model_path, engine or VLLMSettings())
    if kind == "openai":
        server = server or ServerSettings()
        if not server.base_url:
            raise UserError("the openai backend needs the server's URL (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIBackend(model=server.served_model or model_path, base_url=server.base_url,
                             api_key=server.api_key, timeout_s=server.request_timeout, max_retries=server.max_retries,
                             concurrency=concurrency)
    if kind == "hf":
        from .hf import HFBackend  # loads the torchvision shim: only for this backend

        return HFBackend(model_path)
    raise UserError(f"unknown backend {kind!r}; choose from {', '.join(BACKENDS)}")
