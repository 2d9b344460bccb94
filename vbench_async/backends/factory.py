"""The backend kinds, each one declared record, and the one place a backend is built from its kind and settings
(evaluation runs and judge passes alike). Nothing else compares kind names: callers ask the record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from .base import CONCURRENCY, Backend
from .openai import OpenAIBackend, ServerSettings
from .vllm import VLLMBackend, VLLMSettings


@dataclass(frozen=True)
class BackendKind:
    name: str
    help: str
    settings: type | None  # the settings class this kind reads (VLLMSettings, ServerSettings), None: none
    in_process: bool  # loads the model in this process: its devices, its engine's logs, its weights' fingerprint
    sizes_context: bool  # its context and batch budget come from the run's workload plan

    def check(self, server: ServerSettings | None = None) -> None:
        """What this kind needs before anything starts (a server kind needs the server's URL)."""
        if self.settings is ServerSettings and not (server and server.base_url):
            raise UserError(f"the {self.name} backend needs the server's URL, base_url (--base-url, e.g. "
                            "http://127.0.0.1:8000/v1)")

    def options(self, engine: VLLMSettings, server: ServerSettings, concurrency: int) -> dict[str, Any]:
        """Its settings as a manifest records them (a secret, the API key, redacted)."""
        from ..settings import to_json

        if self.settings is VLLMSettings:
            return to_json(engine, hide_secrets=True)
        if self.settings is ServerSettings:
            return {**to_json(server, hide_secrets=True), "concurrency": concurrency}
        return {}

    def describe_target(self, server: ServerSettings | None) -> str:
        """How the start-up line names it: the kind, and where a server kind sends requests."""
        return self.name if self.in_process else f"{self.name} at {server.base_url if server else '?'}"


KINDS: dict[str, BackendKind] = {k.name: k for k in (
    BackendKind("vllm", "in-process AsyncLLM", VLLMSettings, in_process=True, sizes_context=True),
    BackendKind("openai", "an OpenAI-compatible server (--base-url)", ServerSettings, in_process=False,
                sizes_context=False),
    BackendKind("hf", "transformers generate, in-process", None, in_process=True, sizes_context=False),
)}
BACKENDS = tuple(KINDS)
DEFAULT_BACKEND = "vllm"


def backend_kind(name: str) -> BackendKind:
    try:
        return KINDS[name]
    except KeyError:
        raise UserError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}") from None


def backend_field(help: str | None = None, **metadata: Any) -> Any:
    """The `backend` setting of a settings dataclass (a run's, a judge's): one declaration of its flag."""
    text = help or "; ".join(f"{k.name}: {k.help}" for k in KINDS.values())
    return field(default=DEFAULT_BACKEND, metadata={"help": text, "choices": BACKENDS, **metadata})


def make_backend(kind: str, model_path: str, engine: VLLMSettings | None = None,
                 server: ServerSettings | None = None, concurrency: int = CONCURRENCY) -> Backend:
    """`kind`: vllm (in-process AsyncLLM, `engine`), openai (a server, `server`; at most `concurrency` requests in
    flight) or hf (transformers). Building starts nothing: `await backend.start()` does."""
    record = backend_kind(kind)
    record.check(server)
    if record.name == "vllm":
        return VLLMBackend(model_path, engine or VLLMSettings())
    if record.name == "openai":
        assert server is not None and server.base_url  # check() said so
        return OpenAIBackend(model=server.served_model or model_path, base_url=server.base_url,
                             api_key=server.api_key, timeout_s=server.request_timeout, max_retries=server.max_retries,
                             concurrency=concurrency)
    from .hf import HFBackend  # loads the torchvision shim: only for this backend

    return HFBackend(model_path)
