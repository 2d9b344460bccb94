"""A training rollout engine seen as an evaluation `Backend`, so validation runs the ordinary evaluation on it.

The runner's pipeline sends one request at a time, many in flight; a rollout engine (`RolloutEngine`: vLLM's `LLM` or
transformers `generate`) takes a list and blocks. The requests that arrive while the engine is busy are therefore
gathered and sent as the next batch, from one worker thread, so the engine is never entered twice at once and the
event loop keeps loading frames meanwhile. The engine stays the trainer's: `close` leaves it running.

On a tensor-parallel group (`lockstep`) every rank runs the same shard and the engine call is a collective, so before
each call the ranks agree on the batch (tp_group.py): the requests all of them hold, in one order, at most
`max_batch`; a request no peer will send fails with its reason instead of hanging the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Completion, Request
from ..errors import SampleError
from ..failure_kinds import FailureKind
from .rollout import RolloutEngine, Sampled, trim
from .tp_group import Agreement, Lockstep


@dataclass
class _Pending:
    request: Request
    future: asyncio.Future
    submitted: float = field(default_factory=time.perf_counter)


class RolloutBackend:
    """`Backend` over a rollout engine. `kind` is the engine's backend kind (vllm or hf), recorded in the manifest."""

    def __init__(self, engine: RolloutEngine, kind: str, step: int, max_batch: int = 64,
                 lockstep: Lockstep | None = None, stall_s: float = 60.0):
        self.engine, self.kind, self.step, self.max_batch = engine, kind, step, max_batch
        self.lockstep, self.stall_s = lockstep, stall_s
        self.name = kind
        self._tokenizer = engine.processor.tokenizer
        self._pending: list[_Pending] = []
        self._drain: asyncio.Task | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._arrivals = 0
        self._arrived: asyncio.Event | None = None
        self._closed: str | None = None  # why nothing more is generated (a TP peer finished, or the group is stuck)
        self.batches = 0

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="validation-engine")

    async def generate(self, request: Request) -> Completion:
        if self._closed is not None:
            raise SampleError(FailureKind.ENGINE_ERROR, self._closed)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(request, future))
        self._arrivals += 1
        if self._arrived is not None:
            self._arrived.set()
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._send_batches())
        return await future

    def _agree(self, ids: list[str]) -> Agreement:
        if self.lockstep is None:
            return Agreement(ids[: self.max_batch])
        try:
            return self.lockstep.agree(ids, self.max_batch)
        except TimeoutError:  # a peer neither posted nor finished in time: stop rather than wait on
            self.lockstep.closed = True
            return Agreement([], ids, closed=True)

    async def _send_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(0)  # requests submitted in the same turn of the loop join this batch
            self._pending = [p for p in self._pending if not p.future.done()]  # cancelled meanwhile (Ctrl-C)
            if not self._pending:
                break
            held, seen = list(self._pending), self._arrivals
            agreed = await loop.run_in_executor(self._pool, self._agree, [p.request.request_id for p in held])
            by_id = {p.request.request_id: p for p in held}
            if agreed.closed:
                self._closed = ("the tensor-parallel group's engine stopped taking requests (a peer finished its "
                                "share, or the ranks' requests no longer line up)")
                self._fail(self._pending, self._closed)
                self._pending = []
                return
            dropped = [by_id[i] for i in agreed.drop]
            self._fail(dropped, "a peer of the tensor-parallel group could not send this request (its frames or "
                                "prompt failed there)")
            batch = [by_id[i] for i in agreed.batch]
            gone = {id(p) for p in batch + dropped}
            self._pending = [p for p in self._pending if id(p) not in gone]
            if not batch:  # nothing in common yet: ask again once another request arrives
                await self._next_arrival(seen)
                continue
            await self._send(loop, batch)

    async def _next_arrival(self, seen: int) -> None:
        if self._arrived is None:
            self._arrived = asyncio.Event()
        self._arrived.clear()
        if self._arrivals == seen:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), self.stall_s)

    @staticmethod
    def _fail(pending: list[_Pending], message: str) -> None:
        for p in pending:
            if not p.future.done():
                p.future.set_exception(SampleError(FailureKind.ENGINE_ERROR, message))

    async def _send(self, loop: asyncio.AbstractEventLoop, batch: list[_Pending]) -> None:
        sent = time.perf_counter()
        try:
            rows = await loop.run_in_executor(self._pool, self.engine.generate, [p.request for p in batch])
            self.batches += 1
        except Exception as exc:  # noqa: BLE001 - the whole call failed: each request's failure, not the run's
            self._fail(batch, f"{type(exc).__name__}: {exc}")
            return
        done = time.perf_counter()
        for p, row in zip(batch, rows):
            if p.future.done():
                continue
            if row is None:
                p.future.set_exception(SampleError(FailureKind.ENGINE_ERROR,
                                                   "the rollout engine rejected the request (its log says why)"))
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
