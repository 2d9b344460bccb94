"""The evaluation of a planned run (`runner.py` plans it): the engine started beside the frame loading, a cold cache
decoded behind the loop, the loop over every pending entry, the engine closed however the loop ends.

Start-up counts: the engine is built in a thread while frames are loaded (or decoded) beside it, so a newcomer waits
for the slower of the two, not their sum.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..backends.base import Backend, NoRequests
from ..backends.factory import make_backend
from ..backends.vllm import VLLMSettings
from ..phases import mark
from ..samples import Sample
from .pipeline import BenchmarkPlan, LoopStats, Pipeline, Progress, group_by_video
from .run_config import RunConfig, run_sampling, run_system_prompt

if TYPE_CHECKING:
    import numpy as np

    from ..backends.factory import BackendKind
    from ..frames import FrameCache, VideoJob
    from ..models import ModelRef
    from ..scoring.base import Score
    from ..workload import WorkloadPlan

log = logging.getLogger(__name__)

# Builds a run's backend from its kind and settings (make_backend's signature). The evaluation server passes its own,
# which hands out the engine it keeps instead of starting one per run.
BackendFactory = Callable[..., Backend]


def execute(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache,
             workload: WorkloadPlan | None = None, backends: BackendFactory = make_backend) -> dict[str, Any]:
    from ..frames import VideoJob, preprocess

    def jobs() -> Iterator[VideoJob]:  # one per question (preprocess counts them), made on the fly, not listed
        return (VideoJob(video=e.video, spec=e.spec, window=e.window, benchmark=p.benchmark.id)
                for p in plans for e in p.entries if e.video is not None and e.error is None)

    mode = cfg.mode
    if mode == "auto":
        unique = {(str(j.video), j.spec, j.window) for j in jobs()}
        # Headers only, no frames read; in parallel: each check fingerprints its video (hashing is C code that
        # releases the GIL), and a suite of thousands of videos must not hash them one by one before it starts.
        with ThreadPoolExecutor(max_workers=min(16, (os.cpu_count() or 1) * 4), thread_name_prefix="probe") as pool:
            cached = sum(pool.map(lambda u: cache.has(Path(u[0]), u[1], u[2]), unique))
        mode = "eval" if not unique or cached >= 0.9 * len(unique) else "both"
        log.info("mode auto -> %s (%d of %d videos cached)", mode, cached, len(unique))

    stats: dict[str, Any] = {"mode": mode}
    if mode == "preprocess":
        report = preprocess(jobs(), cache, workers=cfg.decode_workers, progress=cfg.progress)
        stats["preprocess"] = report.to_dict()
        return stats

    with contextlib.ExitStack() as open_stores:
        # Lock the result files first: a second run into the same output directory is refused before an engine starts.
        for p in plans:
            open_stores.enter_context(p.store)
        return _evaluate(cfg, model, plans, cache, mode, jobs, stats, workload, backends)


def _evaluate(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache, mode: str,
              jobs: Callable[[], Iterator[VideoJob]], stats: dict[str, Any],
              workload: WorkloadPlan | None = None, backends: BackendFactory = make_backend) -> dict[str, Any]:
    sendable = any(e.error is None for p in plans for e in p.entries)
    # Every pending sample already failed (missing videos, prompts that cannot fit): record them, start no engine.
    backend = _make_backend(cfg, model, plans, workload, backends) if sendable else NoRequests()
    t0 = time.perf_counter()
    cache.reserve(jobs())  # a cache budget never evicts what a queued request will load; labels for `cache stats`

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()

        async def start() -> None:
            await backend.start()  # backends build their engine off the event loop
            mark("engine_started")
            stats["startup_s"] = round(time.perf_counter() - t0, 3)
            stats["backend"] = backend.describe()  # after start: describing vLLM imports it, which start did off-loop

        # While the engine starts, the loop's loaders already fill its queue with frames, and on a cold cache the
        # preprocessing pass decodes every video behind them; the first request goes when the engine is ready. (An
        # engine that waited for every video to be decoded first sat idle for the difference: a 150 s clip at a real
        # frame budget takes seconds to decode, and a suite of thousands longer than any engine start.)
        starter = asyncio.create_task(start())
        decoding = _decode_behind(loop, cfg, cache, jobs, stats) if mode == "both" else None
        try:
            loop_stats = await _loop(cfg, model, plans, cache, backend, decoding, starter)
        except BaseException:
            if decoding is not None:
                decoding.stop.set()  # Ctrl-C or a failed start: the decodes in flight finish, nothing new starts
            raise
        if decoding is not None:  # its remaining keys were loaded by the loop already: it only confirms them
            await decoding.future
        stats["loop"] = loop_stats.as_dict()
        if loop_stats.first_request_at is not None:
            stats["time_to_first_request_s"] = round(loop_stats.first_request_at - t0, 3)
        return stats

    return asyncio.run(main())


@dataclasses.dataclass
class _Decoding:
    """The cold cache's decoding, in its own thread beside the evaluation loop."""

    future: asyncio.Future[None]
    stop: threading.Event


def _decode_behind(loop: asyncio.AbstractEventLoop, cfg: RunConfig, cache: FrameCache,
                   jobs: Callable[[], Iterator[VideoJob]], stats: dict[str, Any]) -> _Decoding:
    """Decode every pending video into the cache, in the order the loop will ask for them, in a thread of its own:
    the loop's loaders share the decode of a key in flight (FrameCache single-flight) and decode a key this thread
    has not reached yet themselves (it then finds the entry made). Its own thread, not the loop's default executor,
    which asyncio.run joins on the way out: Ctrl-C must not wait for a decode in flight."""
    from ..frames import preprocess

    stop = threading.Event()
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preprocess")

    def run() -> None:
        report = preprocess(jobs(), cache, workers=cfg.decode_workers, progress=cfg.progress, stop=stop)
        stats["preprocess"] = report.to_dict()
        mark("preprocessed")

    future = loop.run_in_executor(thread, run)
    thread.shutdown(wait=False)  # the submitted job runs on; the thread ends with it
    return _Decoding(future, stop)


async def _loop(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache, backend: Backend,
                decoding: _Decoding | None, started: asyncio.Task[None]) -> LoopStats:
    """The evaluation loop over every pending entry, from while the backend is `started`; the engine is closed when the
    loop ends, however it ends. A failure of the decoding behind it (the cache's disk, not a video) ends the loop with
    that failure."""
    groups = group_by_video([e for p in plans for e in p.entries])
    bar = _progress_bar(sum(len(g.items) for g in groups), cfg.progress)
    pipeline = Pipeline(
        backend=backend,
        load_video=cache.get_or_decode,
        load_image=_image_loader(model.family),
        score=_scorer(cfg),
        sampling=run_sampling(cfg),
        system=run_system_prompt(cfg),
        concurrency=cfg.concurrency,
        loaders=cfg.loaders,
        queue_size=cfg.queue_size,
        progress=bar,
        ablation=cfg.ablation,
    )
    task = asyncio.ensure_future(pipeline.run(groups, ready=started))
    if decoding is not None:
        decoding.future.add_done_callback(lambda f: task.cancel() if _failure(f) else None)
    try:
        stats = await task
        mark("loop_done")
        return stats
    except asyncio.CancelledError:
        failure = _failure(decoding.future) if decoding is not None else None
        if failure is not None:
            raise failure from None
        raise
    finally:
        if bar is not None:
            bar.close()
        if not started.done():
            # The loop ended before the engine was ready (Ctrl-C, a full disk): the backend stops its own start-up
            # when cancelled, at once, rather than after a start that can take minutes.
            started.cancel()
            with contextlib.suppress(BaseException):
                await started
        elif not started.cancelled() and _failure(started) is None:
            await backend.close()
            mark("engine_closed")


def _failure(future: asyncio.Future[Any]) -> BaseException | None:
    """The exception a finished, not cancelled, future ended with (None otherwise)."""
    return future.exception() if future.done() and not future.cancelled() else None


def engine_settings(cfg: RunConfig, plans: list[BenchmarkPlan], workload: WorkloadPlan | None = None) -> VLLMSettings:
    """The run's engine settings: the sampling seed, the frame budget to profile memory with, and the context, batch
    budget and profiling video from the workload plan (an explicit max_model_len is already the plan's)."""
    specs = [p.spec for p in plans]
    # Profile memory with the run's real frame budget, not the model's maximum (faster start-up).
    settings = dataclasses.replace(cfg.engine, seed=run_sampling(cfg).seed,
                                   profile_frames=max((s.nframes or s.max_frames for s in specs), default=None),
                                   profile_pixels=max((s.max_pixels for s in specs), default=None))
    if workload is not None:
        workload.engine.apply(settings)
    return settings


def backend_options(cfg: RunConfig, kind: BackendKind, plans: list[BenchmarkPlan],
                    workload: WorkloadPlan | None = None) -> dict[str, Any]:
    """The settings of the run's backend (`kind`, as the entry point resolved it), as the manifest records them."""
    return kind.options(engine_settings(cfg, plans, workload), cfg.server, cfg.concurrency)


def _make_backend(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], workload: WorkloadPlan | None,
             backends: BackendFactory = make_backend) -> Backend:
    return backends(cfg.backend, model.path, engine=engine_settings(cfg, plans, workload), server=cfg.server,
                    concurrency=cfg.concurrency)


def _scorer(cfg: RunConfig) -> Callable[[Sample, str], Score]:
    from ..benchmarks.registry import run_scorer

    # each sample read by its benchmark's official protocol (the recipe's where it names one) and the careful grader
    return run_scorer(cfg.recipe)


def _image_loader(family: str) -> Callable[[Path], np.ndarray]:
    from ..frames import load_image

    return lambda path: load_image(path, family)


def _progress_bar(total: int, enabled: bool) -> Progress | None:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="evaluating", unit="q", dynamic_ncols=True)
