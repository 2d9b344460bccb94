"""`vbench-async run` as a library call: load the selection, plan the work (each benchmark's pending entries, the
workload plan that sizes the engine), evaluate it (evaluation/execute.py), summarise.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..backends.base import CONCURRENCY
from ..backends.factory import make_backend
from ..benchmarks.include import included
from ..errors import DataMissing, SampleError, UserError
from ..failure_kinds import EnvironmentFault, FailureKind
from ..phases import mark
from ..results.manifest import plain
from ..results.result_config import RecipeIdentity, RecordedFrames, RecordedSampling, ResultConfig
from ..results.result_file import ResultStore, config_hash
from ..results.rundir_lock import RunDirLock
from ..sample_result import INVALID_TASK
from ..samples import Sample
from .execute import BackendFactory, backend_options, execute
from .pipeline import BenchmarkPlan, PlanEntry
from .preflight import check_writable, no_data
from .run_config import MODES, ResolvedRun, RunConfig, recipe_of, recorded, resolve_run, run_sampling, run_system_prompt

if TYPE_CHECKING:
    from ..backends.factory import BackendKind
    from ..benchmarks.registry import Benchmark
    from ..frames import FrameCache, FrameSettings, VideoJob
    from ..frames.spec import FrameSpec
    from ..models import ModelRef
    from ..results.summary_record import Summary
    from ..sharding import ShardSelection
    from ..workload import WorkloadPlan

__all__ = ["BenchmarkPlan", "RunConfig", "frame_cache", "plan", "run", "video_jobs"]

log = logging.getLogger(__name__)


def run(cfg: RunConfig, on_plan: Callable[[WorkloadPlan | None, dict[str, str]], None] | None = None,
        backends: BackendFactory = make_backend, resolved: ResolvedRun | None = None) -> Summary:
    """Run an evaluation; return the summary (also written to OUTPUT_DIR/summary.json), with `run_dir` and, for a
    shard, `merged` (whether this shard completed the run and merged it). `on_plan` gets the workload plan of what is
    left to run (None when it could not be made) and the benchmarks not run, before any engine starts. `backends`
    builds the backend, called as `make_backend` is (the evaluation server's keeps one engine across runs).
    `resolved`: the model, backend kind and run directory as the entry point resolved them (`resolve_run(cfg)` when
    not given); nothing below works them out again from `cfg`."""
    if cfg.mode not in MODES:
        raise UserError(f"unknown mode {cfg.mode!r}; choose from {', '.join(MODES)}")
    t_start = time.time()
    resolved = resolved or resolve_run(cfg)
    model, run_dir = resolved.model, resolved.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    # One writer per run directory, whatever its config (the shards of one run share it). The selection's own card
    # folders are known for the run only (a server job's must not outlive it).
    with RunDirLock(run_dir, shared=bool(cfg.shard)), included(*cfg.selection.include):
        return _run_locked(cfg, model, run_dir, t_start, on_plan, backends, resolved.kind)


def _run_locked(cfg: RunConfig, model: ModelRef, run_dir: Path, t_start: float,
                on_plan: Callable[[WorkloadPlan | None, dict[str, str]], None] | None,
                backends: BackendFactory, kind: BackendKind) -> Summary:
    from ..results import summaries

    loaded, not_run = _load(cfg)
    cache = frame_cache(cfg)
    selection = _shard_selection(cfg, model, loaded, run_dir) if cfg.shard else None
    plans = [_plan_benchmark(b, model, cfg, run_dir, samples, selection, cache.decoder) for b, samples in loaded]
    del loaded  # the plans hold what is still to run; finished samples need not stay in memory
    workload = workload_plan(cfg, kind, model, plans, cache, not_run) if cfg.mode != "preprocess" else None
    if workload is not None and kind.sizes_context:
        _mark_overflow(plans, workload)
    if workload is not None:  # the start line says how much of the selection a resumed run already has, and
        workload.n_done = sum(p.n_total - len(p.entries) for p in plans)  # whether an engine starts at all
        workload.n_to_send = sum(1 for p in plans for e in p.entries if e.error is None)
    mark("planned")
    if on_plan is not None:
        on_plan(workload, not_run)

    stats: dict[str, Any] = {}
    pending = sum(len(p.entries) for p in plans)
    cfg = dataclasses.replace(cfg, concurrency=requests_in_flight(cfg, kind, workload, pending))  # the manifest says it
    interrupted = False
    stopped: EnvironmentFault | None = None
    try:
        if cfg.mode == "preprocess" or pending:
            stats = execute(cfg, model, plans, cache, workload, backends)
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
    if stopped is None:  # a repaired record's new line replaces its old failure (an interrupted run's too)
        replace_repaired(plans)
    try:
        summary = summaries.write_run_outputs(
            run_dir=run_dir,
            model=model,
            run_config=plain(recorded(cfg)),
            backend_options=backend_options(cfg, kind, plans, workload),
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
    summary.run_dir = str(run_dir)
    if selection is not None and not interrupted:
        from ..results.merge import merge_if_complete

        # The last shard to finish merges all of them into summary.json (a no-op while any sample is missing).
        summary.merged_now = merge_if_complete(run_dir, {p.benchmark.id: p.store.config_hash for p in plans},
                                              cfg.shard[1])
    if interrupted:
        raise KeyboardInterrupt
    return summary


def _load(cfg: RunConfig) -> tuple[list[tuple[Benchmark, list[Sample | SampleError]]], dict[str, str]]:
    """(benchmark, samples) of every benchmark whose data is there, and why each of the others is not run. Raises
    UserError when none has data: a run of nothing is a mistake, not a result."""
    loaded, not_run = [], {}
    recipe = recipe_of(cfg)
    for bench in cfg.selection.resolve():
        bench.use_recipe(recipe, cfg.prompt.prompt_variant)  # its prompts, frames, hash (config), manifest follow
        try:
            loaded.append((bench, cfg.selection.samples(bench)))
        except DataMissing as exc:  # a user with 21 of 22 datasets runs the 21
            not_run[bench.id] = str(exc)
            log.debug("not running %s: %s", bench.id, exc)
    if not_run:
        no_data(cfg.selection.data_root, not_run, len(not_run) + len(loaded), bool(loaded))
    return loaded, not_run


def frame_cache(cfg: RunConfig) -> FrameCache:
    from ..frames import FrameCache

    # Retrying failures reaches the cache too: a video whose decode failed last time is tried again. New entries are
    # written raw on the critical path and compressed later, at idle priority.
    cache = FrameCache.at(cfg.cache_dir, cfg.cache_max_gb, retry_failed=cfg.retry_failed, compress_later=True)
    check_writable(cache.root)
    return cache


def plan(cfg: RunConfig) -> WorkloadPlan:
    """The workload plan of the whole selection (finished samples included), without a run directory or an engine:
    `vbench-async plan`, whose entry point this is: the model and backend kind are resolved here, once."""
    loaded, not_run = _load(cfg)  # before the model: no data is said at once
    resolved = resolve_run(cfg)
    model = resolved.model
    cache = frame_cache(cfg)
    plans = [_plan_benchmark(b, model, cfg, resolved.run_dir, samples, decoder=cache.decoder, skip_done=False)
             for b, samples in loaded]
    return workload_plan(cfg, resolved.kind, model, plans, cache, not_run, strict=True)


def video_jobs(cfg: RunConfig, model: ModelRef, overrides: list[FrameSettings]) -> list[VideoJob]:
    """The frame jobs of the selection's samples under each of the frame settings `overrides` (a sweep's budgets),
    with the samples loaded once; samples whose video path is unsafe are left to the runs to record."""
    jobs = []
    for bench, samples in _load(cfg)[0]:
        specs = [bench.frame_spec(model, o) for o in overrides]  # as each run has them
        jobs += bench.video_jobs(samples, specs, cfg.selection.data_root, cfg.selection.allow_outside_root)[0]
    return jobs


def workload_plan(cfg: RunConfig, kind: BackendKind, model: ModelRef, plans: list[BenchmarkPlan], cache: FrameCache,
                  not_run: dict[str, str], strict: bool = False) -> WorkloadPlan | None:
    """The plan of `plans`' pending entries (workload/plan.py) on the run's backend `kind`. None when the model's
    processor cannot be read, unless `strict`: a run then goes on unplanned, with the engine's default settings."""
    from ..workload import build_plan

    engine = cfg.engine
    sized = kind.sizes_context
    try:
        return build_plan(
            model, [(p.benchmark, p.spec, p.entries) for p in plans],
            cache, max_tokens=max((p.config.sampling.max_tokens or 0 for p in plans),
                                  default=run_sampling(cfg).max_tokens),
            concurrency=min(cfg.concurrency or engine.max_num_seqs, engine.max_num_seqs),  # sequences held at once
            max_model_len=engine.max_model_len if sized else None,
            max_num_batched_tokens=engine.max_num_batched_tokens if sized else None,
            not_run=not_run, system=run_system_prompt(cfg))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a run without a plan still runs, with the engine's defaults
        if strict:
            raise UserError(f"cannot plan {model.name}: {type(exc).__name__}: {exc}") from exc
        log.warning("no workload plan (%s: %s); the engine keeps its default settings", type(exc).__name__, exc)
        return None


def requests_in_flight(cfg: RunConfig, kind: BackendKind, workload: WorkloadPlan | None, pending: int) -> int:
    """--concurrency, or its default: with the in-process engine, as many pending requests as their frames' memory
    allows (workload/sizing.py); with a server or transformers, CONCURRENCY."""
    if cfg.concurrency:
        return cfg.concurrency
    if workload is None or not kind.sizes_context:
        return CONCURRENCY
    from ..workload import sizing

    return sizing.requests_in_flight(running=cfg.engine.max_num_seqs * cfg.engine.data_parallel_size,
                                     largest_video=workload.engine.profile_video, pending=pending,
                                     memory_bytes=sizing.machine_memory_bytes())


def _mark_overflow(plans: list[BenchmarkPlan], workload: WorkloadPlan) -> None:
    """Record the samples the engine would refuse as context_overflow, before any request: with their token count."""
    over = workload.overflowing()
    limit = workload.engine.max_model_len
    for p in plans:
        for e in p.entries:
            n = over.get(e.sample.key)
            if n is not None and e.error is None:
                e.error = SampleError(FailureKind.CONTEXT_OVERFLOW,
                                      f"the prompt needs {n} tokens (+ {workload.max_tokens} to answer); the "
                                      f"engine's context is {limit} tokens")


def _shard_selection(cfg: RunConfig, model: ModelRef, loaded: list[tuple[Benchmark, list[Sample | SampleError]]],
                     run_dir: Path) -> ShardSelection:
    from ..sharding import Shard, items_for, select

    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    items = [it for b, samples in loaded
             for it in items_for(b, samples, b.frame_spec(model, cfg.frame_overrides), data_root, outside)]
    return select(Shard(*cfg.shard), items, run_dir)


def result_config(benchmark: Benchmark, model: ModelRef, cfg: RunConfig, spec: FrameSpec,
                  decoder: str | None) -> ResultConfig:
    """What can change `benchmark`'s answers in this run: what its config hash covers and its result file is named
    after (`results/result_config.py`)."""
    recipe = benchmark.recipe
    return ResultConfig(
        model=model.fingerprint, backend=cfg.backend, decoder=decoder, benchmark=benchmark.id,
        frames=RecordedFrames.of(spec.to_dict()), prompt=benchmark.prompt_template_hash(), thinking=cfg.thinking,
        sampling=RecordedSampling.of(run_sampling(cfg, benchmark.id).to_dict()), ablation=cfg.ablation,
        recipe=RecipeIdentity.of(recipe.identity) if recipe is not None else None)


def _plan_benchmark(benchmark: Benchmark, model: ModelRef, cfg: RunConfig, run_dir: Path,
                    samples: list[Sample | SampleError], selection: ShardSelection | None = None,
                    decoder: str | None = None, skip_done: bool = True) -> BenchmarkPlan:
    """One benchmark's part of a run: its frame spec, result store and pending entries (`plan` is the whole
    selection's workload plan, built from these)."""
    spec = benchmark.frame_spec(model, cfg.frame_overrides)
    config = result_config(benchmark, model, cfg, spec, decoder)
    sampling = run_sampling(cfg, benchmark.id)
    store = ResultStore(run_dir, benchmark.id, config_hash(config.to_json()),
                        shard=tuple(cfg.shard) if cfg.shard else None)
    kinds = store.failure_kinds() if skip_done else {}
    repaired = repaired_records(kinds, samples, store.invalid_records)
    if repaired:  # evaluated again; each one's failure goes once its new result is written (`replace_repaired`)
        kinds = {sid: kind for sid, kind in kinds.items() if sid not in repaired}
    if selection is not None:
        selection.write_index(run_dir, benchmark.id, store.config_hash, config, [s.sample_id for s in samples])
        samples = selection.keep(benchmark.id, samples)
    done = store.completed_ids(cfg.retry_failed, kinds) if skip_done else set()
    render = benchmark.prompt_renderer(cfg.thinking)
    data_root, outside = cfg.selection.data_root, cfg.selection.allow_outside_root
    video_of = _memo_video_path(benchmark, data_root, outside)
    entries = []
    for s in samples:
        if isinstance(s, SampleError):  # malformed record: still one result line, with its error
            if s.sample_id in done:
                continue
            stub = Sample(benchmark=benchmark.id, sample_id=s.sample_id, task_type=INVALID_TASK, question="", answer="")
            entries.append(PlanEntry(stub, "", store, error=s))
            continue
        if s.sample_id in done:
            continue
        # the prompt is rendered when the request is built
        entry = PlanEntry(sample=s, prompt=render, store=store, sampling=sampling)
        try:
            entry.video = video_of(s) if s.video else None
            entry.images = tuple(benchmark.image_paths(s, data_root, allow_outside=outside)) if s.images else ()
        except SampleError as exc:
            entry.error = exc
        if entry.video is not None:
            entry.spec, entry.window = spec, s.window
        entries.append(entry)
    return BenchmarkPlan(benchmark, store, spec, config, n_total=len(samples), entries=entries,
                         sample_ids=frozenset(s.sample_id for s in samples), repaired=repaired)


def repaired_records(kinds: Mapping[str, str | None], samples: list[Sample | SampleError],
                     invalid_records: Callable[[], set[str]]) -> dict[str, str]:
    """The `record_invalid` lines whose record has been repaired since, each with the id its new line will have: the
    id is a valid sample's now, or it names a position (`#N`, given to a record without a usable id) whose record is
    valid now. Only lines of records that were not samples count (`invalid_records`, read only when there is such a
    line): a sample whose answer could not be scored fails with `record_invalid` too, and stays settled. A repaired
    record is evaluated again; its old failure must not stand beside the new result."""
    if not any(kind == FailureKind.RECORD_INVALID for kind in kinds.values()):
        return {}
    invalid = {sid for sid in invalid_records() if kinds.get(sid) == FailureKind.RECORD_INVALID}
    valid = {s.sample_id for s in samples if isinstance(s, Sample)}
    still = {s.sample_id for s in samples if isinstance(s, SampleError)}
    out = {}
    for sid in invalid - still:
        position = sid[1:] if sid.startswith("#") else ""
        if sid in valid:
            out[sid] = sid
        elif position.isdigit() and int(position) < len(samples) and isinstance(samples[int(position)], Sample):
            out[sid] = samples[int(position)].sample_id
    return out


def replace_repaired(plans: list[BenchmarkPlan]) -> None:
    """Drop the `record_invalid` line of each repaired record whose new result is in the file now (under the file's
    lock); a record still without one keeps its old line (stale for a `#N` id, so counted nowhere). Reads and
    rewrites nothing for a benchmark without a repaired record."""
    for p in plans:
        if not p.repaired:
            continue
        written = p.store.failure_kinds().keys() - p.store.invalid_records()
        p.store.drop_failures({old for old, new in p.repaired.items() if new in written})


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
