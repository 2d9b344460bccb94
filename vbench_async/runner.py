"""`vbench-async run` as a library call: plan the work, warm the cache while the engine starts, evaluate, summarise.

Start-up counts: the engine is built in a thread while frames are preprocessed (or loaded) in parallel, so a newcomer
waits for the slower of the two, not their sum.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .backends.base import CONCURRENCY, Backend, NoRequests
from .backends.factory import backend_kind, make_backend
from .backends.vllm import VLLMSettings
from .benchmarks.include import included
from .errors import DataMissing, SampleError, UserError
from .failure_kinds import EnvironmentFault
from .phases import mark
from .pipeline import LoopStats, Pipeline, PlanEntry, Progress, group_by_video
from .preflight import check_writable, no_data
from .results.manifest import PlannedBenchmark, plain
from .results.rundir_lock import RunDirLock
from .results.store import ResultStore, config_hash
from .run_config import MODES, RunConfig, resolve_model, run_dir_for
from .samples import Sample

if TYPE_CHECKING:
    import numpy as np

    from .benchmarks.registry import Benchmark
    from .frames import FrameCache, VideoJob
    from .models import ModelRef
    from .scoring.base import Score
    from .sharding import ShardSelection
    from .workload import WorkloadPlan

log = logging.getLogger(__name__)

# Builds a run's backend from its kind and settings (make_backend's signature). The evaluation server passes its own,
# which hands out the engine it keeps instead of starting one per run.
BackendFactory = Callable[..., Backend]

@dataclass
class BenchmarkPlan(PlannedBenchmark):
    entries: list[PlanEntry] = field(default_factory=list)  # pending work
    sample_ids: frozenset[str] | None = None  # the annotation file's samples now: the summary counts only these


def run(cfg: RunConfig, on_plan: Callable[[WorkloadPlan | None, dict[str, str]], None] | None = None,
        backends: BackendFactory = make_backend) -> dict[str, Any]:
    """Run an evaluation; return the summary dict (also written to OUTPUT_DIR/summary.json), with `run_dir` and, for a
    shard, `merged` (whether this shard completed the run and merged it). `on_plan` gets the workload plan of what is
    left to run (None when it could not be made) and the benchmarks not run, before any engine starts. `backends`
    builds the backend, called as `make_backend` is (the evaluation server's keeps one engine across runs)."""
    if cfg.mode not in MODES:
        raise UserError(f"unknown mode {cfg.mode!r}; choose from {', '.join(MODES)}")
    t_start = time.time()
    model = resolve_model(cfg)
    run_dir = run_dir_for(cfg, model)
    run_dir.mkdir(parents=True, exist_ok=True)
    # One writer per run directory, whatever its config (the shards of one run share it). The selection's own card
    # folders are known for the run only (a server job's must not outlive it).
    with RunDirLock(run_dir, shared=bool(cfg.shard)), included(*cfg.selection.include):
        return _run_locked(cfg, model, run_dir, t_start, on_plan, backends)


def _run_locked(cfg: RunConfig, model: ModelRef, run_dir: Path, t_start: float,
                on_plan: Callable[[WorkloadPlan | None, dict[str, str]], None] | None,
                backends: BackendFactory = make_backend) -> dict[str, Any]:
    from .results import summaries

    loaded, not_run = _load(cfg)
    cache = frame_cache(cfg)
    selection = _shard_selection(cfg, model, loaded, run_dir) if cfg.shard else None
    plans = [_plan_benchmark(b, model, cfg, run_dir, samples, selection, cache.decoder) for b, samples in loaded]
    del loaded  # the plans hold what is still to run; finished samples need not stay in memory
    workload = workload_plan(cfg, model, plans, cache, not_run) if cfg.mode != "preprocess" else None
    if workload is not None:  # the start line says how much of the selection a resumed run already has
        workload.n_done = sum(p.n_total - len(p.entries) for p in plans)
    mark("planned")
    if on_plan is not None:
        on_plan(workload, not_run)
    if workload is not None and backend_kind(cfg.backend).sizes_context:
        _mark_overflow(plans, workload)

    stats: dict[str, Any] = {}
    pending = sum(len(p.entries) for p in plans)
    cfg = dataclasses.replace(cfg, concurrency=requests_in_flight(cfg, workload, pending))  # the manifest says it
    interrupted = False
    stopped: EnvironmentFault | None = None
    try:
        if cfg.mode == "preprocess" or pending:
            stats = _execute(cfg, model, plans, cache, workload, backends)
        else:
            log.info("every sample already has a result in %s (nothing to run)", run_dir)
    except KeyboardInterrupt:
        # Ctrl-C: in-flight requests were cancelled (vLLM aborts them); finished lines are on disk. Summarise them,
        # marked partial, then let the CLI exit 130.
        interrupted = True
        stats["interrupted"] = True
    except EnvironmentFault as exc:  # a full disk, a read-only cache: summarise what finished (if the disk lets us)
        stopped = exc
        stats["interrupted"] = True
        stats["stopped"] = str(exc)
    for p in plans:
        p.entries = []  # the summary reads the result files; the work list can go before it does
    try:
        summary = summaries.write_run_outputs(
            run_dir=run_dir,
            model=model,
            run_config=plain(cfg),
            backend_options=backend_options(cfg, plans, workload),
            plans=plans,
            loop_stats=stats,
            started_at=t_start,
            shard=cfg.shard,
            not_run=not_run,
            recheck=not pending and cfg.mode != "preprocess" and not interrupted,
        )
    except OSError as exc:
        if stopped is None:
            raise
        log.warning("could not write the partial summary either: %s", exc)
    mark("summary_written")
    if stopped is not None:
        raise stopped
    summary["run_dir"] = str(run_dir)
    if selection is not None and not interrupted:
        from .results.merge import merge_if_complete

        # The last shard to finish merges all of them into summary.json (a no-op while any sample is missing).
        summary["merged"] = merge_if_complete(run_dir, {p.benchmark.id: p.store.config_hash for p in plans},
                                              cfg.shard[1])
    if interrupted:
        raise KeyboardInterrupt
    return summary


def _load(cfg: RunConfig) -> tuple[list[tuple[Benchmark, list[Sample | SampleError]]], dict[str, str]]:
    """(benchmark, samples) of every benchmark whose data is there, and why each of the others is not run. Raises
    UserError when none has data: a run of nothing is a mistake, not a result."""
    loaded, not_run = [], {}
    for bench in cfg.selection.resolve():
        bench.prompt_variant = cfg.prompt.prompt_variant  # its prompts, their hash (config) and the manifest follow
        try:
            loaded.append((bench, cfg.selection.samples(bench)))
        except DataMissing as exc:  # a user with 21 of 22 datasets runs the 21
            not_run[bench.id] = str(exc)
            log.debug("not running %s: %s", bench.id, exc)
    if not_run:
        no_data(cfg.selection.data_root, not_run, len(not_run) + len(loaded), bool(loaded))
    return loaded, not_run


def frame_cache(cfg: RunConfig) -> FrameCache:
    from .frames import FrameCache

    # Retrying failures reaches the cache too: a video whose decode failed last time is tried again. New entries are
    # written raw on the critical path and compressed later, at idle priority.
    cache = FrameCache.at(cfg.cache_dir, cfg.cache_max_gb, retry_failed=cfg.retry_failed, compress_later=True)
    check_writable(cache.root)
    return cache


def plan(cfg: RunConfig) -> WorkloadPlan:
    """The workload plan of the whole selection (finished samples included), without a run directory or an engine:
    `vbench-async plan`."""
    loaded, not_run = _load(cfg)  # before the model: no data is said at once
    model = resolve_model(cfg)
    cache = frame_cache(cfg)
    run_dir = run_dir_for(cfg, model)
    plans = [_plan_benchmark(b, model, cfg, run_dir, samples, decoder=cache.decoder, skip_done=False)
             for b, samples in loaded]
    return workload_plan(cfg, model, plans, cache, not_run, strict=True)


def video_jobs(cfg: RunConfig, model: ModelRef, overrides: list[dict[str, int | float]]) -> list[VideoJob]:
    """The frame jobs of the selection's samples under each of the frame settings `overrides` (a sweep's budgets),
    with the samples loaded once; samples whose video path is unsafe are left to the runs to record."""
    jobs = []
    for bench, samples in _load(cfg)[0]:
        specs = [bench.frame_spec(model, o) for o in overrides]  # as each run has them
        jobs += bench.video_jobs(samples, specs, cfg.selection.data_root, cfg.selection.allow_outside_root)[0]
    return jobs


def workload_plan(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache,
                  not_run: dict[str, str], strict: bool = False) -> WorkloadPlan | None:
    """The plan of `plans`' pending entries (workload/plan.py). None when the model's processor cannot be read, unless
    `strict`: a run then goes on unplanned, with the engine's default settings."""
    from .workload import build_plan

    engine = cfg.engine
    sized = backend_kind(cfg.backend).sizes_context
    try:
        return build_plan(
            model, [(p.benchmark, p.spec, p.entries) for p in plans],
            cache, thinking=cfg.thinking, max_tokens=cfg.sampling.max_tokens,
            concurrency=min(cfg.concurrency or engine.max_num_seqs, engine.max_num_seqs),  # sequences held at once
            max_model_len=engine.max_model_len if sized else None,
            max_num_batched_tokens=engine.max_num_batched_tokens if sized else None,
            not_run=not_run)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a run without a plan still runs, with the engine's defaults
        if strict:
            raise UserError(f"cannot plan {model.name}: {type(exc).__name__}: {exc}") from exc
        log.warning("no workload plan (%s: %s); the engine keeps its default settings", type(exc).__name__, exc)
        return None


def requests_in_flight(cfg: RunConfig, workload: WorkloadPlan | None, pending: int) -> int:
    """--concurrency, or its default: with the in-process engine, as many pending requests as their frames' memory
    allows (workload/sizing.py); with a server or transformers, CONCURRENCY."""
    if cfg.concurrency:
        return cfg.concurrency
    if workload is None or not backend_kind(cfg.backend).sizes_context:
        return CONCURRENCY
    from .workload import sizing

    return sizing.requests_in_flight(running=cfg.engine.max_num_seqs * cfg.engine.data_parallel_size,
                                     largest_video=workload.engine.profile_video, pending=pending,
                                     memory_bytes=sizing.machine_memory_bytes())


def _mark_overflow(plans: list[BenchmarkPlan], workload: WorkloadPlan) -> None:
    """Record the samples the engine would refuse as context_overflow, before any request: with their token count."""
    from .workload.plan import CONTEXT_OVERFLOW

    over = workload.overflowing()
    limit = workload.engine.max_model_len
    for p in plans:
        for e in p.entries:
            n = over.get(e.item.sample.key)
            if n is not None and e.item.error is None:
                e.item.error = SampleError(CONTEXT_OVERFLOW, f"the prompt needs {n} tokens (+ {workload.max_tokens} "
                                           f"to answer); the engine's context is {limit} tokens")


def _shard_selection(cfg: RunConfig, model: ModelRef, loaded: list[tuple[Benchmark, list[Sample | SampleError]]],
                     run_dir: Path) -> ShardSelection:
    from .sharding import Shard, items_for, select

    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    items = [it for b, samples in loaded
             for it in items_for(b, samples, b.frame_spec(model, cfg.frame_overrides), data_root, outside)]
    return select(Shard(*cfg.shard), items, run_dir)


def _plan_benchmark(benchmark: Benchmark, model: ModelRef, cfg: RunConfig, run_dir: Path,
                    samples: list[Sample | SampleError], selection: ShardSelection | None = None,
                    decoder: str | None = None, skip_done: bool = True) -> BenchmarkPlan:
    """One benchmark's part of a run: its frame spec, result store and pending entries (`plan` is the whole
    selection's workload plan, built from these)."""
    spec = benchmark.frame_spec(model, cfg.frame_overrides)
    config = {
        # What can change an answer: the weights (a content hash, or the hub revision), the serving path (in-process
        # vLLM, a server, transformers), the decoder that produced the frames, frames, prompt and sampling.
        "model": model.fingerprint,
        "backend": cfg.backend,
        "decoder": decoder,
        "benchmark": benchmark.id,
        "frames": spec.to_dict(),
        "prompt": benchmark.prompt_template_hash(),
        "thinking": cfg.thinking,
        "sampling": cfg.sampling.to_dict(),
    }
    store = ResultStore(run_dir, benchmark.id, config_hash(config), shard=tuple(cfg.shard) if cfg.shard else None)
    if selection is not None:
        selection.write_index(run_dir, benchmark.id, store.config_hash, config, [s.sample_id for s in samples])
        samples = selection.keep(benchmark.id, samples)
    done = store.completed_ids(retry_failed=cfg.retry_failed) if skip_done else set()
    render = benchmark.prompt_renderer(cfg.thinking)
    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    video_of = _memo_video_path(benchmark, data_root, outside)
    entries = []
    for s in samples:
        if isinstance(s, SampleError):  # malformed record: still one result line, with its error
            if s.sample_id in done:
                continue
            stub = Sample(benchmark=benchmark.id, sample_id=s.sample_id, task_type="invalid", question="", answer="")
            entries.append(PlanEntry(stub, "", store, error=s))
            continue
        if s.sample_id in done:
            continue
        entry = PlanEntry(sample=s, prompt=render, store=store)  # the prompt is rendered when the request is built
        try:
            entry.video = video_of(s) if s.video else None
            entry.images = tuple(benchmark.image_paths(s, data_root, allow_outside=outside)) if s.images else ()
        except SampleError as exc:
            entry.error = exc
        if entry.video is not None:
            entry.spec, entry.window = spec, s.window
        entries.append(entry)
    return BenchmarkPlan(benchmark, store, spec, config, n_total=len(samples), entries=entries,
                         sample_ids=frozenset(s.sample_id for s in samples))


def _memo_video_path(benchmark: Benchmark, data_root: Path | None, outside: bool) -> Callable[[Sample], Path]:
    """`benchmark.video_path`, checked once per distinct path: resolving symlinks is a few system calls per path
    component, and 100,000 questions typically share a few thousand videos."""
    known: dict[tuple[str, bool], Path | SampleError] = {}

    def video_path(s: Sample) -> Path:
        key = (s.video, "clip_source" in s.fields)  # all video_path reads of the sample
        if key not in known:
            try:
                known[key] = benchmark.video_path(s, data_root, allow_outside=outside)
            except SampleError as exc:
                known[key] = exc
        found = known[key]
        if isinstance(found, SampleError):
            raise SampleError(found.kind, str(found))  # a fresh one per sample (a re-raise would grow its traceback)
        return found

    return video_path


def _execute(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache,
             workload: WorkloadPlan | None = None, backends: BackendFactory = make_backend) -> dict[str, Any]:
    from .frames import VideoJob, preprocess

    def jobs() -> Iterator[VideoJob]:  # one per question (preprocess counts them), made on the fly, not listed
        return (VideoJob(video=e.video, spec=e.spec, window=e.window, benchmark=p.benchmark.id)
                for p in plans for e in p.entries if e.video is not None and e.item.error is None)

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
    sendable = any(e.item.error is None for p in plans for e in p.entries)
    # Every pending sample already failed (missing videos, prompts that cannot fit): record them, start no engine.
    backend = _backend(cfg, model, plans, workload, backends) if sendable else NoRequests()
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
    from .frames import preprocess

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
        score=_scorer(),
        sampling=cfg.sampling,
        concurrency=cfg.concurrency,
        loaders=cfg.loaders,
        queue_size=cfg.queue_size,
        progress=bar,
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
    settings = dataclasses.replace(cfg.engine, seed=cfg.sampling.seed,
                                   profile_frames=max((s.nframes or s.max_frames for s in specs), default=None),
                                   profile_pixels=max((s.max_pixels for s in specs), default=None))
    if workload is not None:
        workload.engine.apply(settings)
    return settings


def backend_options(cfg: RunConfig, plans: list[BenchmarkPlan], workload: WorkloadPlan | None = None) -> dict[str, Any]:
    """The settings of the run's backend, as the manifest records them."""
    return backend_kind(cfg.backend).options(engine_settings(cfg, plans, workload), cfg.server, cfg.concurrency)


def _backend(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], workload: WorkloadPlan | None,
             backends: BackendFactory = make_backend) -> Backend:
    return backends(cfg.backend, model.path, engine=engine_settings(cfg, plans, workload), server=cfg.server,
                    concurrency=cfg.concurrency)


def _scorer() -> Callable[[Sample, str], Score]:
    from .benchmarks import score_sample  # each sample read by its benchmark's official protocol and the careful grader

    return score_sample


def _image_loader(family: str) -> Callable[[Path], np.ndarray]:
    from .frames import load_image

    return lambda path: load_image(path, family)


def _progress_bar(total: int, enabled: bool) -> Progress | None:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="evaluating", unit="q", dynamic_ncols=True)
