"""A training rollout engine seen as an evaluation `Backend`, so validation runs the ordinary evaluation on it.

The runner's pipeline sends one request at a time, many in flight; a rollout engine (`RolloutEngine`: vLLM's `LLM` or
transformers `generate`) takes a list and blocks. The requests that arrive while the engine is busy are therefore
gathered and sent as the next batch, from one worker thread, so the engine is never entered twice at once and the
event loop keeps loading frames meanwhile. The engine stays the trainer's: `close` leaves it running.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Completion, Request
from ..errors import SampleError
from .rollout import RolloutEngine, Sampled, trim


@dataclass
class _Pending:
    request: Request
    future: asyncio.Future
    submitted: float = field(default_factory=time.perf_counter)


class RolloutBackend:
    """`Backend` over a rollout engine. `kind` is the engine's backend kind (vllm or hf), recorded in the manifest."""

    def __init__(self, engine: RolloutEngine, kind: str, step: int, max_batch: int = 64):
        self.engine, self.kind, self.step, self.max_batch = engine, kind, step, max_batch
        self.name = kind
        self._tokenizer = engine.processor.tokenizer
        self._pending: list[_Pending] = []
        self._drain: asyncio.Task | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.batches = 0

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="validation-engine")

    async def generate(self, request: Request) -> Completion:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(request, future))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._send_batches())
        return await future

    async def _send_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(0)  # requests submitted in the same turn of the loop join this batch
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            batch = [p for p in batch if not p.future.done()]  # cancelled meanwhile (Ctrl-C)
            if not batch:
                continue
            sent = time.perf_counter()
            try:
                rows = await loop.run_in_executor(self._pool, self.engine.generate, [p.request for p in batch])
                self.batches += 1
            except Exception as exc:  # noqa: BLE001 - the whole call failed: each request's failure, not the run's
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(SampleError("engine_error", f"{type(exc).__name__}: {exc}"))
                continue
            done = time.perf_counter()
            for p, row in zip(batch, rows):
                if p.future.done():
                    continue
                if row is None:
                    p.future.set_exception(SampleError("engine_error", "the rollout engine rejected the request "
                                                                       "(its log says why)"))
                else:
                    p.future.set_result(self._completion(row, p.submitted, sent, done))

    def _completion(self, rows: list[Sampled], submitted: float, sent: float, done: float) -> Completion:
        """The evaluation's view of a rollout's samples (n is 1 in an evaluation): text decoded, tokens counted."""
        trimmed = [trim(list(r.token_ids), self.engine.ids) for r in rows]
        texts = [self._tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in trimmed]
        return Completion(
            text=texts[0] if texts else "",
            prompt_tokens=next((r.prompt_tokens for r in rows if r.prompt_tokens is not None), 0),
            output_tokens=sum(len(ids) for ids, _ in trimmed),
            finish_reason="stop" if trimmed and trimmed[0][1] else "length",
            latency_s=done - submitted,
            engine_wait_s=sent - submitted,
            texts=texts if len(texts) > 1 else None,
            token_ids=[ids for ids, _ in trimmed],
        )

    async def close(self) -> None:
        """Stop the worker thread; the engine itself stays up for training."""
        if self._drain is not None and not self._drain.done():
            self._drain.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.kind, "engine": "the training's rollout engine", "weights": f"step {self.step}",
                "engine_class": type(self.engine).__name__}
