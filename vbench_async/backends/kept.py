"""The engine the server keeps between jobs.

An in-process vLLM engine binds itself to the event loop of its first request, and every run of the runner has a
loop of its own (`asyncio.run`). So the kept backend lives on one long-lived loop, in a thread of its own, and each
run talks to it through `KeptBackend`: requests are handed over with `run_coroutine_threadsafe`, and a run that is
cancelled cancels its requests there too (vLLM aborts them). A job for another model (or another backend kind)
closes the kept engine and starts the new one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from .base import CONCURRENCY, Backend, Completion, Request
from .factory import backend_kind, make_backend
from .openai import ServerSettings
from .vllm import VLLMSettings

T = TypeVar("T")
log = logging.getLogger(__name__)


class JobCancelled(KeyboardInterrupt):
    """Raised on a job's event loop to stop its run: the runner handles it as Ctrl-C (finished lines kept, a partial
    summary written)."""


@dataclass
class _Kept:
    key: tuple[str, str, str | None]  # (backend kind, model path, server URL)
    backend: Backend
    engine: VLLMSettings | None  # the settings it was built with (vllm): later runs are planned against them
    started: bool = False


class EngineKeeper:
    """Holds at most one started backend on its own event loop; `factory()` is what the runner builds backends with."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="serve-engine", daemon=True)
        self._thread.start()
        self._kept: _Kept | None = None
        self._lock = threading.Lock()
        self.starts = 0  # engines started since the server began (a test and /health read it)

    # -- for the job worker ----------------------------------------------------------------------------------------
    def engine_settings(self, kind: str, model_path: str) -> VLLMSettings | None:
        """The settings of the kept engine when it would serve this model (a run is planned against its context)."""
        with self._lock:
            kept = self._kept
            if kept is not None and kept.started and kept.key[:2] == (kind, model_path):
                return kept.engine
        return None

    def factory(self, on_start: Callable[[asyncio.AbstractEventLoop], None]) -> Callable[..., Backend]:
        """A `make_backend` for one run: the kept backend when it serves the same model, else a new one (the old one
        closed). `on_start` gets the run's event loop when the run starts its backend (for cancelling it)."""

        def make(kind: str, model_path: str, engine: VLLMSettings | None = None,
                 server: ServerSettings | None = None, concurrency: int = CONCURRENCY) -> Backend:
            key = (kind, model_path, server.base_url if server else None)
            with self._lock:
                if self._kept is None or self._kept.key != key:
                    self._replace(_Kept(key, make_backend(kind, model_path, engine=engine, server=server,
                                                          concurrency=concurrency),
                                        engine if backend_kind(kind).sizes_context else None))
                kept = self._kept
            return KeptBackend(self, kept, on_start)

        return make

    def describe(self) -> dict[str, Any]:
        kept = self._kept
        return {"engine_starts": self.starts, "kept": None if kept is None else {
            "backend": kept.key[0], "model": kept.key[1], "started": kept.started}}

    def discard(self) -> None:
        """Forget the kept backend (its engine died): the next run starts a new one."""
        with self._lock:
            self._replace(None)

    def close(self) -> None:
        self.discard()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    # -- on the engine loop ----------------------------------------------------------------------------------------
    def call(self, coro: Awaitable[T]) -> asyncio.Future:
        """Run `coro` on the engine loop; await the returned future from any other loop (cancelling it cancels it)."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _ensure_started(self, kept: _Kept) -> None:
        if not kept.started:
            await kept.backend.start()
            kept.started = True
            self.starts += 1

    def _replace(self, new: _Kept | None) -> None:
        """Close the kept backend (waiting for it) and keep `new` instead. Called with the lock held."""
        old, self._kept = self._kept, new
        if old is not None and old.started:
            try:
                asyncio.run_coroutine_threadsafe(old.backend.close(), self._loop).result(timeout=120)
            except Exception as exc:  # noqa: BLE001 - a dead engine may fail to close; it is dropped all the same
                log.warning("closing the previous engine failed: %s: %s", type(exc).__name__, exc)


class KeptBackend:
    """A run's view of the kept backend: `start` starts it once, `close` leaves it running for the next run."""

    def __init__(self, keeper: EngineKeeper, kept: _Kept,
                 on_start: Callable[[asyncio.AbstractEventLoop], None]):
        self._keeper, self._kept, self._on_start = keeper, kept, on_start
        self.name = kept.backend.name

    async def start(self) -> None:
        self._on_start(asyncio.get_running_loop())
        await self._keeper.call(self._keeper._ensure_started(self._kept))

    async def close(self) -> None:
        pass  # the server closes it: when a job needs another model, or when it stops

    async def generate(self, request: Request) -> Completion:
        return await self._keeper.call(self._kept.backend.generate(request))

    def describe(self) -> dict[str, Any]:
        return {**self._kept.backend.describe(), "kept_by_server": True, "engine_starts": self._keeper.starts}
