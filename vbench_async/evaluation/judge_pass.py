"""LLM-as-judge: a second pass over a run directory, through the project's own backends (vllm, hf, openai).

Every result line that waits for a judge (free text without a careful reading, or an official reading that hands
the item to the judge) and did not fail is judged by its benchmark's protocol (`scoring/judges/`: VideoReasonBench,
VCR-Bench, Video-MMLU, MMVU, TempCompass; the generic prompt otherwise), one or more rounds of prompts per item.
An item whose official reading already has a value (a rule decided it) takes that value without a prompt. Each
outcome is appended to the judge's own file (`results/verdicts.py` says where, and how verdicts replace scores). An
unparsable reply is a judge failure: the item keeps its offline score and stays counted in `n_needs_judge`, never
becomes a silent zero. Then the run's summary is recomputed with the verdicts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend, Request, SamplingParams
from ..backends.factory import BackendKind, backend_field, backend_kind, make_backend
from ..backends.openai import ServerSettings
from ..backends.vllm import VLLMSettings
from ..errors import EngineDead, SampleError
from ..models import ModelRef
from ..results.current import drop_stale
from ..results.result_file import read_results
from ..results.rundir import read_manifest, read_summary
from ..results.summaries import recompute_summary, recorded_benchmarks
from ..results.verdict_record import Verdict
from ..results.verdicts import (
    JudgeIdentity,
    JudgeStore,
    activate_judge,
    answer_hash,
    is_current,
    judge_store,
    read_verdicts,
)
from ..sample_result import Result
from ..scoring.judges import PROMPT_HASH, Ask, JudgeItem, JudgeProtocol, Outcome, judge_for
from .judge_outcome import JudgedRun, JudgeFailure, JudgePass
from .run_config import JUDGE_MODEL_HELP, ResolvedRun, RunConfig, run_sampling

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ the pass


@dataclass
class JudgeConfig:
    """A judge pass's settings, declared once (the fields with a `help` are `vbench-async judge`'s flags)."""

    model: str = field(metadata={"flag": "--judge-model", "help": JUDGE_MODEL_HELP})  # `run --judge-model`'s
    backend: str = backend_field("where the judge runs: in-process vLLM, an OpenAI-compatible server, or "
                                 "transformers")
    engine: VLLMSettings = field(default_factory=VLLMSettings)  # backend vllm
    server: ServerSettings = field(default_factory=ServerSettings)  # backend openai (`served_model` is not used)
    max_tokens: int | None = field(default=None, metadata={
        "min": 1, "help": "tokens per judge reply (default: each protocol step's own limit; raise it for reasoning "
                          "judges)"})
    seed: int = field(default=0, metadata={"help": "sampling seed (decoding is greedy)"})
    concurrency: int = field(default=8, metadata={
        "min": 1, "help": "judge requests in flight (also the vLLM engine's sequences at once)"})
    retry_failed: bool = field(default=False, metadata={"help": "judge again the items whose verdict was unparsable"})


def resolve_identity(cfg: JudgeConfig, kind: BackendKind | None = None) -> tuple[ModelRef, JudgeIdentity]:
    """(model ref for the backend, identity). A served model (openai backend) is known by its name only. `kind`:
    `cfg.backend`'s kind as the entry point resolved it (`vbench-async judge`, a run's --judge-model); looked up here
    only for a direct library call that passes none."""
    from ..models import resolve

    sampling = SamplingParams(temperature=0.0, max_tokens=cfg.max_tokens or 0, seed=cfg.seed).to_dict()
    if not (kind if kind is not None else backend_kind(cfg.backend)).in_process:
        ref = ModelRef(name=cfg.model, path=cfg.model, family="served", fingerprint=f"served:{cfg.model}")
    else:
        ref = resolve(cfg.model)
    return ref, JudgeIdentity(model=cfg.model, fingerprint=ref.fingerprint, backend=cfg.backend, sampling=sampling,
                              prompt_hash=PROMPT_HASH)


def _judge_backend(cfg: JudgeConfig, ref: ModelRef) -> Backend:
    # Text-only requests: no multimodal profiling at engine start.
    engine = replace(cfg.engine, max_videos=0, max_images=0, seed=cfg.seed)
    # The server's name of the evaluated model is not the judge's: the judge is cfg.model.
    server = replace(cfg.server, served_model=None)
    return make_backend(cfg.backend, ref.path, engine=engine, server=server, concurrency=cfg.concurrency)


async def judge_one(backend: Backend, identity: JudgeIdentity, protocol: JudgeProtocol, r: Result,
                    limit: asyncio.Semaphore) -> Verdict:
    """Run one item's protocol to its outcome and return its verdict line. Each round's prompts go out together."""
    item = JudgeItem.from_result(r)
    sampling = SamplingParams(**identity.sampling)
    steps: list[dict[str, Any]] = []
    ruled = item.official.value if item.official is not None else None
    step: list[Ask] | Outcome = (Outcome(float(ruled), "by rule", None, {"rule": "official reading"})
                                 if ruled is not None and protocol.name != "generic" else protocol.start(item))
    tokens = [0, 0]

    async def ask(a: Ask, n: int) -> str:
        params = replace(sampling, max_tokens=sampling.max_tokens or a.max_tokens)
        async with limit:
            c = await backend.generate(Request(f"judge-{identity.key}-{r.sample_id}-{a.stage}-{n}", a.text(),
                                               sampling=params))
        tokens[0] += c.prompt_tokens
        tokens[1] += c.output_tokens
        return c.text

    try:
        while isinstance(step, list):
            replies = await asyncio.gather(*(ask(a, len(steps)) for a in step))
            steps += [{"stage": a.stage, "output": t} for a, t in zip(step, replies)]
            step = protocol.advance(item, step, replies)
    except SampleError as exc:
        step = Outcome.failed("judge_engine_error", str(exc))
    except EngineDead:
        raise
    except Exception as exc:  # noqa: BLE001 - a protocol bug on one item must not stop the pass: recorded, logged
        log.exception("judge protocol %s failed on %s", protocol.name, r.sample_id)
        step = Outcome.failed("judge_protocol_error", f"{type(exc).__name__}: {exc}"[:300])
    return Verdict(sample_id=r.sample_id, benchmark=r.benchmark or None, judge_id=identity.judge_id,
                   protocol=protocol.name, prompt_hash=protocol.prompt_hash, answer_hash=answer_hash(r), steps=steps,
                   output=steps[-1]["output"] if steps else None, verdict=step.verdict, score=step.score,
                   error=step.error, info=step.info, prompt_tokens=tokens[0], output_tokens=tokens[1])


async def judge_pending(backend: Backend, identity: JudgeIdentity, work: list[tuple[JudgeStore, Result]],
                        concurrency: int = 8) -> JudgePass:
    """Judge each (store, result) and append one verdict line per item. A dead engine stops the pass (finished lines
    stay); any other per-item problem is recorded as a judge failure (the pass's `failures`)."""
    limit = asyncio.Semaphore(max(1, concurrency))
    judged: list[Verdict] = []
    failures: list[JudgeFailure] = []

    async def one(store: JudgeStore, r: Result) -> None:
        verdict = await judge_one(backend, identity, judge_for(r), r, limit)
        store.append(verdict.to_json())
        if verdict.error:
            failures.append(JudgeFailure.of(verdict))
        else:
            judged.append(verdict)

    try:
        async with asyncio.TaskGroup() as tg:
            for store, r in work:
                tg.create_task(one(store, r))
    except* EngineDead as group:
        raise group.exceptions[0] from None
    return JudgePass(n_judged=len(judged), n_judge_failed=len(failures), failures=failures,
                     judge_id=identity.judge_id, key=identity.key)


def judge_run_dir(run_dir: Path, cfg: JudgeConfig, kind: BackendKind | None = None) -> JudgedRun:
    """Judge every open-ended item of the run's current result files not judged yet by this judge, then recompute
    summary.json. Returns the new summary with the pass's counts. The run directory's lock is held throughout: a
    judge pass rewrites summary.json, never while a run writes the directory. `kind`: `cfg.backend`'s kind as the
    entry point resolved it (`resolve_identity`)."""
    from ..results.rundir_lock import RunDirLock

    run_dir = Path(run_dir)
    read_summary(run_dir)  # not a result directory: say so before taking its lock
    with RunDirLock(run_dir):
        return _judge_locked(run_dir, cfg, kind)


def _judge_locked(run_dir: Path, cfg: JudgeConfig, kind: BackendKind | None) -> JudgedRun:
    summary = read_summary(run_dir)
    recorded_benchmarks(summary, read_manifest(run_dir))  # a recipe this version does not hold: refused before judging
    ref, identity = resolve_identity(cfg, kind)
    work: list[tuple[JudgeStore, Result]] = []
    stores: list[JudgeStore] = []
    n_skipped = n_skipped_failed = 0
    earlier: list[JudgeFailure] = []  # items judged before, without a usable verdict
    for b in summary.benchmarks.values():
        results_path = run_dir / str(b.results_file)
        store = judge_store(run_dir, results_path, identity.key)
        done = read_verdicts(store)
        todo = []
        for r in drop_stale(read_results(results_path).values(), b):  # samples no longer in the file: skipped
            if not r.needs_judge():
                continue
            prev = done.get(r.sample_id)
            if prev and is_current(prev, r) and not (cfg.retry_failed and prev.error):
                n_skipped += 1
                if prev.error:  # judged before, unparsably: not "done"
                    n_skipped_failed += 1
                    earlier.append(JudgeFailure.of(prev, r.benchmark))
                continue
            todo.append(r)
        if todo:
            stores.append(store)
            work += [(store, r) for r in todo]
    counts = JudgePass(judge_id=identity.judge_id, key=identity.key)
    if work:
        backend = _judge_backend(cfg, ref)

        async def main() -> JudgePass:
            await backend.start()
            try:
                return await judge_pending(backend, identity, work, cfg.concurrency)
            finally:
                await backend.close()

        opened = [s.open() for s in stores]
        try:
            counts = asyncio.run(main())
        finally:
            for s in opened:
                s.close()
    activate_judge(run_dir, identity)
    return JudgedRun(recompute_summary(run_dir), replace(counts, n_skipped=n_skipped,
                                                         n_skipped_failed=n_skipped_failed, earlier_failures=earlier))


def judge_after_run(resolved: ResolvedRun, run_cfg: RunConfig, judge_model: str, **overrides: Any) -> JudgedRun:
    """Judge a finished run on the run's own backend kind and settings (engine knobs, server URL), then recompute its
    summary. `resolved`: the run as its entry point resolved it (its directory, its backend kind). `overrides` set
    JudgeConfig fields (max_tokens, concurrency, ...)."""
    cfg = JudgeConfig(model=judge_model, backend=run_cfg.backend, engine=run_cfg.engine, server=run_cfg.server,
                      seed=run_sampling(run_cfg).seed)
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise TypeError(f"JudgeConfig has no field {key!r}")
        setattr(cfg, key, value)
    # the run's kind, unless an override names the judge's own backend (then its kind is looked up)
    return judge_run_dir(resolved.run_dir, cfg, None if "backend" in overrides else resolved.kind)
