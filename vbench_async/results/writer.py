"""The result writer: one thread that appends result lines and fsyncs them, so the event loop never waits on a disk.

A caller awaits `write(store, result)`; it returns once the line is on disk (fsync returned), so a result counts as
done exactly when it did before (docs/guarantees.md: a crash loses at most the lines not yet fsynced, and no sample
is counted before its line is durable). Lines queued while the thread is inside an fsync are written together and
share the next fsync (group commit): at high concurrency one fsync covers many results.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from ..sample_result import Result
from .result_file import ResultStore

BATCH = 256  # lines per fsync at most


@dataclass
class _Job:
    store: ResultStore
    result: Result | Mapping[str, Any]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]


_STOP = object()


class ResultWriter:
    """Appends results from a thread; use as a context manager around the loop that awaits `write`."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="results", daemon=True)
        self.fsyncs = 0  # how many fsyncs the written lines took (lines / fsyncs: the group-commit factor)
        self.lines = 0

    def __enter__(self) -> ResultWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def write(self, store: ResultStore, result: Result | Mapping[str, Any]) -> None:
        """Append `result` to `store` and return once it is fsynced. Raises what `store.append` raises for this line
        (InvalidResult for a line readers would reject, EnvironmentFault for a full or read-only disk)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._jobs.put(_Job(store, result, loop, done))
        await done  # cancelled (Ctrl-C): the thread still writes the line whole; the caller just does not count it

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()

    # -- the thread --------------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch = [self._jobs.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            stop = any(job is _STOP for job in batch)
            self._write([job for job in batch if isinstance(job, _Job)])
            if stop:
                return

    def _write(self, batch: list[_Job]) -> None:
        by_store: dict[int, list[_Job]] = {}
        for job in batch:
            by_store.setdefault(id(job.store), []).append(job)
        for jobs in by_store.values():
            lines, written = [], []
            for job in jobs:
                try:
                    lines.append(job.store.encode(job.result))
                    written.append(job)
                except Exception as exc:  # noqa: BLE001 - this line's problem, told to its caller alone
                    _settle(job, exc)
            if not lines:
                continue
            try:
                jobs[0].store.write_lines(lines)
            except BaseException as exc:  # noqa: BLE001 - a disk fault: every caller of this batch hears it
                for job in written:
                    _settle(job, exc)
                continue
            self.fsyncs += 1
            self.lines += len(lines)
            for job in written:
                _settle(job, None)


def _settle(job: _Job, exc: BaseException | None) -> None:
    def settle() -> None:
        if not job.done.done():
            if exc is None:
                job.done.set_result(None)
            else:
                job.done.set_exception(exc)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed (the run ended): nobody waits for this line any more
        pass
