"""Frame-budget sweeps: `run --max-frames 16,32,64` evaluates every budget in one command.

Each budget is an ordinary run in its own directory (OUTPUT_DIR/max_frames-N, with its own result files, summary and
manifest), so resuming, merging and the leaderboard treat it like any other run. The frame cache is filled for all
budgets first, with each video opened and decoded once for all of them (FrameCache.ensure_specs); the runs then read
their frames from the cache, all on one engine (started by the largest budget's run, kept for the others).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from ..errors import UserError
from .run_config import ResolvedRun, RunConfig, resolve_run, run_dir_for
from .runner import frame_cache, run, video_jobs

if TYPE_CHECKING:
    from ..results.summary_record import Summary

log = logging.getLogger(__name__)


def budget_dir(base: Path, budget: int) -> Path:
    return base / f"max_frames-{budget}"


def sweep_configs(cfg: RunConfig, budgets: list[int], base: Path) -> list[RunConfig]:
    """One run configuration per budget, each writing into its own directory under the sweep's directory `base`."""
    if len(set(budgets)) != len(budgets):
        raise UserError(f"--max-frames lists a budget twice: {','.join(map(str, budgets))}")
    if cfg.shard is not None:
        raise UserError("a frame-budget sweep runs unsharded; shard each budget's run separately instead")
    return [dataclasses.replace(cfg, frame_overrides=dataclasses.replace(cfg.frame_overrides, max_frames=b),
                                output_dir=budget_dir(base, b)) for b in budgets]


def run_sweep(cfg: RunConfig, budgets: list[int], on_plan: Callable[..., None] | None = None,
              console: Callable[[Path], ContextManager[Any]] = lambda run_dir: contextlib.nullcontext(),
              resolved: ResolvedRun | None = None) -> tuple[dict[str, Any], list[Summary]]:
    """(the shared preprocessing report, one summary per budget). With mode `preprocess` only the cache is filled.
    `console(run_dir)` surrounds each pass: the shared preprocessing (the sweep's directory) and each budget's run
    (its directory), as `run`'s console surrounds its run (cli/console.py: the engine's logs in RUN_DIR/logs).
    `on_plan(workload, not_run, budget=, first=)` gets each budget's plan (`first`: the run that starts the engine).
    `resolved`: the sweep's model, backend kind and directory as the entry point resolved them (`resolve_run(cfg)` if
    not given):
    the budgets' directories go under its run directory (runs/<name>/max_frames-N with --name)."""
    from ..frames import preprocess

    resolved = resolved or resolve_run(cfg)
    cfgs = sweep_configs(cfg, budgets, resolved.run_dir)
    report: dict[str, Any] = {}
    if cfg.mode != "eval":
        with console(resolved.run_dir), frame_cache(cfg) as cache:
            jobs = video_jobs(cfg, resolved.model, [c.frame_overrides for c in cfgs])
            report = preprocess(jobs, cache, workers=cfg.decode_workers, progress=cfg.progress).to_dict()
    if cfg.mode == "preprocess":
        return report, []
    # The cache holds every budget's frames now: each run reads them (a miss is still decoded on demand).
    return report, run_on_one_engine([dataclasses.replace(c, mode="eval") for c in cfgs], budgets, on_plan, console,
                                     resolved)


def run_on_one_engine(cfgs: list[RunConfig], budgets: list[int], on_plan: Callable[..., None] | None,
                      console: Callable[[Path], ContextManager[Any]], resolved: ResolvedRun) -> list[Summary]:
    """The budgets' runs on one engine, kept between them as the evaluation server keeps its own (backends/kept.py):
    the largest budget runs first, so the engine is sized and profiled for the largest frames, and the others are
    planned against that engine. `on_plan(workload, not_run, budget, first)`: `first` for the run that starts the
    engine. `resolved`: the model (with its label) and backend kind, resolved once by the caller and passed to every
    run, each with its own directory (its config's OUTPUT_DIR). Summaries come back in the order of `cfgs`."""
    from ..backends.kept import EngineKeeper

    keeper = EngineKeeper()
    summaries: dict[int, Summary] = {}
    order = sorted(range(len(cfgs)), key=lambda i: -budgets[i])
    started_in: Path | None = None
    try:
        for n, i in enumerate(order):
            c = cfgs[i]
            kept = keeper.engine_settings(c.backend, resolved.model.path)
            if kept is not None:
                c = dataclasses.replace(c, engine=kept)
            plan = None if on_plan is None else functools.partial(on_plan, budget=budgets[i], first=n == 0)
            run_dir = run_dir_for(c, resolved.model)
            # The engine is closed inside a run's console: its shutdown output is that run's log, not the terminal.
            with console(run_dir):
                if started_in is not None and resolved.kind.in_process:
                    log.info("the engine is the one started by the run in %s: its start-up and the engine core's own "
                             "output are in that run's logs/engine.log", started_in)
                try:
                    summaries[i] = run(c, on_plan=plan, backends=keeper.factory(lambda loop: None),
                                       resolved=dataclasses.replace(resolved, run_dir=run_dir))
                except BaseException:
                    keeper.close()
                    raise
                if n == len(order) - 1:
                    keeper.close()
                    log.info("%d budgets evaluated on %d engine start(s)", len(cfgs), keeper.starts)
            started_in = started_in or (run_dir if keeper.starts else None)
    finally:
        keeper.close()  # a no-op once closed above
    return [summaries[i] for i in range(len(cfgs))]
