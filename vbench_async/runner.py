"""`vbench-async run` as a library call: plan the work, warm the cache while the engine starts, evaluate, summarise.

Start-up counts: the engine is built in a thread while frames are preprocessed (or loaded) in parallel, so a newcomer
waits for the slower of the two, not their sum.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .backends.base import Backend, SamplingParams
from .backends.factory import make_backend
from .backends.openai import ServerSettings
from .backends.vllm import VLLMSettings
from .benchmarks.selection import Selection
from .errors import SampleError, UserError
from .pipeline import Pipeline, PlanEntry, Progress, WorkItem, group_by_video
from .results.manifest import PlannedBenchmark, plain
from .failure_kinds import EnvironmentFault
from .results.rundir_lock import RunDirLock
from .results.store import ResultStore, config_hash
from .samples import Sample

if TYPE_CHECKING:
    import numpy as np

    from .benchmarks.registry import Benchmark
    from .frames import FrameCache, VideoJob
    from .models import ModelRef
    from .scoring.base import Score
    from .sharding import ShardSelection

log = logging.getLogger(__name__)

MODES = ("auto", "preprocess", "eval", "both")


@dataclass
class RunConfig:
    model: str
    selection: Selection = field(default_factory=Selection)
    output_dir: Path | None = None
    cache_dir: Path | None = None
    cache_max_gb: float | None = None  # frame-cache budget (None: $VBENCH_ASYNC_CACHE_MAX_GB, else unbounded)
    backend: str = "vllm"
    mode: str = "auto"
    thinking: bool = False
    sampling: SamplingParams = field(default_factory=SamplingParams)
    frame_overrides: dict[str, int | float] = field(default_factory=dict)  # FrameSpec fields over the card's preset
    concurrency: int = 16
    loaders: int = 2
    queue_size: int = 32
    preprocess_workers: int = 2
    retry_failed: bool = False
    engine: VLLMSettings = field(default_factory=VLLMSettings)  # backend vllm
    server: ServerSettings = field(default_factory=ServerSettings)  # backend openai
    progress: bool = True
    shard: tuple[int, int] | None = None  # (K, N): evaluate only shard K of N (sharding.py); merge combines them


@dataclass
class BenchmarkPlan(PlannedBenchmark):
    entries: list[PlanEntry] = field(default_factory=list)  # pending work
    sample_ids: frozenset[str] | None = None  # the annotation file's samples now: the summary counts only these


def run(cfg: RunConfig) -> dict[str, Any]:
    """Run an evaluation; return the summary dict (also written to OUTPUT_DIR/summary.json), with `run_dir` and, for a
    shard, `merged` (whether this shard completed the run and merged it)."""
    from . import models

    if cfg.mode not in MODES:
        raise UserError(f"unknown mode {cfg.mode!r}; choose from {', '.join(MODES)}")
    t_start = time.time()
    model = models.resolve(cfg.model)
    benchmarks = cfg.selection.resolve()
    run_dir = Path(cfg.output_dir or Path("runs") / model.display_name)
    run_dir.mkdir(parents=True, exist_ok=True)
    # One writer per run directory, whatever its config (the shards of one run share it).
    with RunDirLock(run_dir, shared=bool(cfg.shard)):
        return _run_locked(cfg, model, benchmarks, run_dir, t_start)


def _run_locked(cfg: RunConfig, model: ModelRef, benchmarks: list[Benchmark], run_dir: Path,
                t_start: float) -> dict[str, Any]:
    from .frames import FrameCache
    from .frames.budget import gb_to_bytes
    from .results import summaries

    # Retrying failures reaches the cache too: a video whose decode failed last time is tried again.
    cache_opts: dict[str, Any] = {"retry_failed": cfg.retry_failed}
    if cfg.cache_max_gb is not None:
        cache_opts["max_bytes"] = gb_to_bytes(cfg.cache_max_gb)
    try:
        cache = FrameCache(cfg.cache_dir, **cache_opts) if cfg.cache_dir else FrameCache.default(**cache_opts)
    except ValueError as exc:  # a bad budget or codec in the environment
        raise UserError(str(exc)) from exc
    loaded = [(b, cfg.selection.samples(b)) for b in benchmarks]
    selection = _shard_selection(cfg, model, loaded, run_dir) if cfg.shard else None
    plans = [_plan(b, model, cfg, run_dir, samples, selection) for b, samples in loaded]
    del loaded  # the plans hold what is still to run; finished samples need not stay in memory

    stats: dict[str, Any] = {}
    pending = sum(len(p.entries) for p in plans)
    interrupted = False
    stopped: EnvironmentFault | None = None
    try:
        if cfg.mode == "preprocess" or pending:
            stats = _execute(cfg, model, plans, cache)
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
            backend_options=backend_options(cfg, plans),
            plans=plans,
            loop_stats=stats,
            started_at=t_start,
            shard=cfg.shard,
        )
    except OSError as exc:
        if stopped is None:
            raise
        log.warning("could not write the partial summary either: %s", exc)
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


def _shard_selection(cfg: RunConfig, model: ModelRef, loaded: list[tuple[Benchmark, list[Sample | SampleError]]],
                     run_dir: Path) -> ShardSelection:
    from .sharding import Shard, items_for, select

    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    items = [it for b, samples in loaded
             for it in items_for(b, samples, b.frame_spec(model.family, cfg.frame_overrides), data_root, outside)]
    return select(Shard(*cfg.shard), items, run_dir)


def _plan(benchmark: Benchmark, model: ModelRef, cfg: RunConfig, run_dir: Path, samples: list[Sample | SampleError],
          selection: ShardSelection | None = None) -> BenchmarkPlan:
    spec = benchmark.frame_spec(model.family, cfg.frame_overrides)
    config = {
        "model": model.fingerprint,
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
    done = store.completed_ids(retry_failed=cfg.retry_failed)
    render = functools.partial(benchmark.render_prompt, thinking=cfg.thinking)
    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    entries = []
    for s in samples:
        if isinstance(s, SampleError):  # malformed record: still one result line, with its error
            if s.sample_id in done:
                continue
            stub = Sample(benchmark=benchmark.id, sample_id=s.sample_id, task_type="invalid", question="", answer="")
            entries.append(PlanEntry(WorkItem(stub, "", store, error=s)))
            continue
        if s.sample_id in done:
            continue
        item = WorkItem(sample=s, prompt=render, store=store)  # the prompt is rendered when the request is built
        video, images = None, []
        try:
            video = benchmark.video_path(s, data_root, allow_outside=outside) if s.video else None
            images = benchmark.image_paths(s, data_root, allow_outside=outside) if s.images else []
        except SampleError as exc:
            item.error = exc
        entries.append(PlanEntry(item, video, spec if video else None, s.window if video else None, images or []))
    return BenchmarkPlan(benchmark, store, spec, config, n_total=len(samples), entries=entries,
                         sample_ids=frozenset(s.sample_id for s in samples))


def _execute(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache) -> dict[str, Any]:
    from .frames import VideoJob, preprocess

    def jobs() -> Iterator[VideoJob]:  # one per question (preprocess counts them), made on the fly, not listed
        return (VideoJob(video=e.video, spec=e.spec, window=e.window, benchmark=p.benchmark.id)
                for p in plans for e in p.entries if e.video is not None and e.item.error is None)

    mode = cfg.mode
    if mode == "auto":
        unique = {(str(j.video), j.spec, j.window) for j in jobs()}
        cached = sum(1 for (v, s, w) in unique if cache.has(Path(v), s, w))  # headers only: no frames are read
        mode = "eval" if not unique or cached >= 0.9 * len(unique) else "both"
        log.info("mode auto -> %s (%d of %d videos cached)", mode, cached, len(unique))

    stats: dict[str, Any] = {"mode": mode}
    if mode == "preprocess":
        report = preprocess(jobs(), cache, workers=cfg.preprocess_workers, progress=cfg.progress)
        stats["preprocess"] = report.to_dict()
        return stats

    with contextlib.ExitStack() as open_stores:
        # Lock the result files first: a second run into the same output directory is refused before an engine starts.
        for p in plans:
            open_stores.enter_context(p.store)
        return _evaluate(cfg, model, plans, cache, mode, jobs, stats)


def _evaluate(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache, mode: str,
              jobs: Callable[[], Iterator[VideoJob]], stats: dict[str, Any]) -> dict[str, Any]:
    from .frames import preprocess

    backend = _backend(cfg, model, plans)
    t0 = time.perf_counter()
    cache.reserve(jobs())  # a cache budget never evicts what a queued request will load; labels for `cache stats`

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        # Backends build their engine off the event loop, so frames are preprocessed while the engine starts.
        starter = asyncio.create_task(backend.start())
        if mode == "both":
            stop = threading.Event()  # Ctrl-C: the decoding thread ends after the decodes in flight
            try:
                rep = await loop.run_in_executor(None, lambda: preprocess(
                    jobs(), cache, workers=cfg.preprocess_workers, progress=cfg.progress, stop=stop))
            except asyncio.CancelledError:
                stop.set()
                raise
            stats["preprocess"] = rep.to_dict()
        await starter
        stats["startup_s"] = round(time.perf_counter() - t0, 3)
        stats["backend"] = backend.describe()  # after start: describing vLLM imports it, which start did off-loop
        groups = group_by_video([e for p in plans for e in p.entries])
        total = sum(len(g.items) for g in groups)
        bar = _progress_bar(total, cfg.progress)
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
        try:
            loop_stats = await pipeline.run(groups)
        finally:
            if bar is not None:
                bar.close()
            await backend.close()
        stats["loop"] = loop_stats.as_dict()
        if loop_stats.first_request_at is not None:
            stats["time_to_first_request_s"] = round(loop_stats.first_request_at - t0, 3)
        return stats

    return asyncio.run(main())


def engine_settings(cfg: RunConfig, plans: list[BenchmarkPlan]) -> VLLMSettings:
    """The run's engine settings, with the sampling seed and the frame budget to profile memory with."""
    specs = [p.spec for p in plans]
    # Profile memory with the run's real frame budget, not the model's maximum (faster start-up).
    return dataclasses.replace(cfg.engine, seed=cfg.sampling.seed,
                               profile_frames=max((s.nframes or s.max_frames for s in specs), default=None),
                               profile_pixels=max((s.max_pixels for s in specs), default=None))


def backend_options(cfg: RunConfig, plans: list[BenchmarkPlan]) -> dict[str, Any]:
    """The settings of the run's backend, as the manifest records them."""
    if cfg.backend == "vllm":
        return dataclasses.asdict(engine_settings(cfg, plans))
    if cfg.backend == "openai":
        return {**dataclasses.asdict(cfg.server), "concurrency": cfg.concurrency}
    return {}


def _backend(cfg: RunConfig, model: ModelRef, plans: list[BenchmarkPlan]) -> Backend:
    return make_backend(cfg.backend, model.path, engine=engine_settings(cfg, plans), server=cfg.server,
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
