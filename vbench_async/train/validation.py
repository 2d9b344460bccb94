"""Held-out validation during training: every rank evaluates its share on its own rollout engine.

Each rank runs the ordinary evaluation (`runner.run`) as shard (rank, world) of one run directory,
OUTPUT/validation/step-N, with its rollout engine (already holding the step's weights) as the backend
(`engine_backend.RolloutBackend`): the cost-balanced split of `sharding.py`, the benchmark's frame settings, the
training's frame cache, the same scorers, and the last shard to finish merges the shards into one ordinary run
directory. A sample that fails is recorded with its error and counts as wrong; it never discards the other scores.

With rollout tensor parallelism (T ranks per engine) the shard is the TP group's, (rank // T, world // T), as in
collection (tp_group.py): every rank of the group runs it with one frame loader, so its requests reach the backend in
the plan's order, and the backend agrees each engine call with the peers; the group's first rank writes the run
directory, the others a scratch directory next to it that is removed afterwards.

The ranks then wait for each other through the store (`watch.gather`), not in a collective, so a slow rank trips no
collective timeout, and every rank reads the scores from the merged summary: `val/<benchmark>` is the merged run's
headline score, exactly what `vbench-async run` would report for the same samples.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path

from ..errors import UserError
from ..results.rundir import read_summary, summary_path
from . import watch
from .config import TrainConfig
from .engine_backend import RolloutBackend
from .fsdp import DistInfo
from .rollout import RolloutEngine
from .tp_group import Lockstep, TPGroup

log = logging.getLogger(__name__)


def run_dir(out: Path, step: int) -> Path:
    return Path(out) / "validation" / f"step-{step:06d}"


def peer_dir(out: Path, step: int, rank: int) -> Path:
    """Where a TP group's other ranks run the group's shard (the same requests; the results are the leader's)."""
    return Path(out) / "validation" / f"step-{step:06d}.tp-peer-{rank}"


def validate(cfg: TrainConfig, step: int, info: DistInfo, engine: RolloutEngine, model_dir: str,
             out: Path) -> dict[str, float]:
    """Evaluate this rank's share of the held-out set on `engine`; every rank returns the merged run's scores
    ({"val/<benchmark>": score, "val/samples": n, "val/failed": n}) or {} when the run could not be merged."""
    from ..evaluation import runner

    group = TPGroup(info.rank, info.world, cfg.rollout.tensor_parallel_size)
    where = run_dir(out, step) if group.peer == 0 else peer_dir(out, step, info.rank)
    started = time.perf_counter()
    from ..backends.factory import backend_kind
    from ..backends.vllm import VLLMSettings

    kind, engine_settings = engine.kind, None
    if backend_kind(kind).settings is VLLMSettings:  # the rollout engine's own settings: the plan sizes prompts for
        # its window; the manifest records what the engine really is
        engine_settings = VLLMSettings(max_model_len=cfg.rollout.max_model_len, dtype="bfloat16",
                                       gpu_memory_utilization=cfg.rollout.vllm_gpu_memory_utilization)
    run_cfg = cfg.validation.run_config(model_dir, where, kind, (group.index, group.count) if group.count > 1 else None,
                                        cache_dir=cfg.data.cache_dir, engine=engine_settings)
    lockstep = None
    if group.size > 1:  # one loader: the group's ranks see their requests in the same order
        run_cfg = dataclasses.replace(run_cfg, loaders=1)
        lockstep = Lockstep(f"validation-{step}", group, cfg.validation.timeout_s)
        if group.peer:
            shutil.rmtree(where, ignore_errors=True)  # a fresh scratch run: every request of the shard is sent
    backend = RolloutBackend(engine, kind, step, lockstep=lockstep)
    try:
        with engine.held_awake():
            runner.run(run_cfg, backends=lambda *args, **kwargs: backend)
    except Exception as exc:  # noqa: BLE001 - this share's run as a whole: no merge, no scores, training goes on
        log.warning("validation at step %d (rank %d) failed: %s: %s", step, info.rank, type(exc).__name__, exc,
                    exc_info=not isinstance(exc, UserError))
    finally:
        if lockstep is not None:
            lockstep.finish()  # the peers still holding requests stop waiting for this rank
            if group.peer:
                shutil.rmtree(where, ignore_errors=True)
    if not watch.gather(f"validation-{step}", cfg.validation.timeout_s):
        log.warning("validation at step %d: another rank's share did not finish within validation.timeout_s "
                    "(%g s); training goes on without scores", step, cfg.validation.timeout_s)
        return {}
    scores = merged_scores(run_dir(out, step))
    if scores:
        scores["time/validation_s"] = time.perf_counter() - started
    else:
        log.warning("validation at step %d left no merged summary in %s; no scores", step, run_dir(out, step))
    return scores


def merged_scores(where: Path) -> dict[str, float]:
    """The headline score of each benchmark of a finished run directory, with its sample and failure counts."""
    if not summary_path(where).exists():  # a sharded run has one only once the shards are merged
        return {}
    summary = read_summary(where)
    out = {f"val/{bid}": float(block.score) for bid, block in summary.benchmarks.items() if block.score is not None}
    if out:
        out["val/samples"], out["val/failed"] = float(summary.n_total()), float(summary.n_failed())
    return out
