"""LLM-as-judge for open-ended answers: a second pass over a run directory, through the project's own backends.

For every result line whose `details.needs_judge` is set (open-ended items scored offline by ROUGE-L) and that did not
fail, the judge model sees the question, the reference answer and the model's answer and says CORRECT or INCORRECT.
Each verdict is appended to the judge's own file (`results/verdicts.py` says where, and how verdicts replace scores).
An unparsable verdict is recorded as a judge failure: the item keeps its offline score and stays counted in
`n_needs_judge`, never becomes a silent zero. Then the run's summary is recomputed with the verdicts.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .backends.base import Backend, Request, SamplingParams
from .backends.factory import make_backend
from .backends.openai import ServerSettings
from .backends.vllm import VLLMSettings
from .errors import EngineDead, SampleError
from .models import ModelRef
from .results.current import drop_stale
from .results.rundir import read_summary
from .results.store import read_results
from .results.summaries import recompute_summary
from .results.verdicts import JudgeIdentity, JudgeStore, activate_judge, answer_hash, judge_store, needs_judge

if TYPE_CHECKING:
    from .runner import RunConfig

log = logging.getLogger(__name__)

PROMPT_TEMPLATE = """You are grading an answer to a question about a video. You cannot see the video: judge only \
whether the model's answer means the same as the reference answer. Ignore wording, style and length; an answer that \
contradicts the reference, or leaves out its key fact, is incorrect.

Question:
{question}

Reference answer:
{reference}

Model's answer:
{answer}

Reply with one line: "VERDICT: CORRECT" or "VERDICT: INCORRECT"."""
PROMPT_HASH = hashlib.sha256(PROMPT_TEMPLATE.encode()).hexdigest()[:16]

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_MARKED = re.compile(r"(?:verdict|judg(?:e)?ment|grade|answer)\s*[:=\-]?\s*\**\s*\"?\s*(in)?correct\b", re.I)
_JSON_VERDICT = re.compile(r"\"verdict\"\s*:\s*\"\s*(in)?correct\s*\"", re.I)
_BARE = re.compile(r"^\W*(incorrect|correct|wrong|right|yes|no|true|false|1|0)\W*$", re.I)
_WORDS = re.compile(r"\b(not\s+correct|incorrect|correct)\b", re.I)
_BARE_VALUES = {"correct": True, "right": True, "yes": True, "true": True, "1": True,
                "incorrect": False, "wrong": False, "no": False, "false": False, "0": False}


def judge_prompt(question: str, reference: str, answer: str) -> str:
    return PROMPT_TEMPLATE.format(question=question.strip(), reference=reference.strip(), answer=answer.strip())


def parse_verdict(text: str) -> bool | None:
    """True (correct), False (incorrect) or None (no clear verdict). Reasoning in <think> is ignored; the last
    explicit marker ("VERDICT: ...", {"verdict": ...}) wins; otherwise a bare one-word reply, otherwise the only
    verdict word used. Mixed or absent signals are None: a judge failure, never a guess."""
    text = _THINK.sub(" ", text or "").strip()
    for pattern in (_MARKED, _JSON_VERDICT):
        found = pattern.findall(text)
        if found:
            return not found[-1]
    bare = _BARE.match(text)
    if bare:
        return _BARE_VALUES[bare.group(1).lower()]
    words = {w.lower().split()[0] for w in _WORDS.findall(text)}  # "not correct" counts as a negative
    if words == {"correct"}:
        return True
    if words and words <= {"incorrect", "not"}:
        return False
    return None


def reference_text(answer: object) -> str:
    """The reference answer as a reader would say it: the inside of <answer>...</answer> when present."""
    text = str(answer or "")
    m = _ANSWER_TAG.search(text)
    return m.group(1).strip() if m else text.strip()


# ------------------------------------------------------------------------------------------------ the pass


@dataclass
class JudgeConfig:
    model: str
    backend: str = "vllm"
    engine: VLLMSettings = field(default_factory=VLLMSettings)  # backend vllm
    server: ServerSettings = field(default_factory=ServerSettings)  # backend openai (`served_model` is not used)
    max_tokens: int = 32  # a verdict is one line; reasoning judges need more
    seed: int = 0
    concurrency: int = 8
    retry_failed: bool = False


def resolve_identity(cfg: JudgeConfig) -> tuple[ModelRef, JudgeIdentity]:
    """(model ref for the backend, identity). A served model (openai backend) is known by its name only."""
    from .models import resolve

    sampling = SamplingParams(temperature=0.0, max_tokens=cfg.max_tokens, seed=cfg.seed).to_dict()
    if cfg.backend == "openai":
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


async def judge_pending(backend: Backend, identity: JudgeIdentity, work: list[tuple[JudgeStore, Mapping[str, Any]]],
                        concurrency: int = 8) -> dict[str, int]:
    """Judge each (store, result) and append one verdict line per item. A dead engine stops the pass (finished lines
    stay); any other per-item problem is recorded as a judge failure."""
    sampling = SamplingParams(**identity.sampling)
    limit = asyncio.Semaphore(max(1, concurrency))
    counts = {"n_judged": 0, "n_judge_failed": 0}

    async def one(store: JudgeStore, r: Mapping[str, Any]) -> None:
        prompt = judge_prompt(str(r.get("question") or ""), reference_text(r.get("answer")), str(r.get("output") or ""))
        line: dict[str, Any] = {"sample_id": r["sample_id"], "benchmark": r.get("benchmark"),
                                "judge_id": identity.judge_id, "prompt_hash": identity.prompt_hash,
                                "answer_hash": answer_hash(r), "output": None, "verdict": None, "score": None,
                                "error": None}
        async with limit:
            try:
                c = await backend.generate(Request(f"judge-{identity.key}-{r['sample_id']}", prompt, sampling=sampling))
            except SampleError as exc:
                line["error"] = {"kind": "judge_engine_error", "message": str(exc)}
            else:
                verdict = parse_verdict(c.text)
                line.update(output=c.text, prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens,
                            latency_s=round(c.latency_s, 4))
                if verdict is None:
                    line["error"] = {"kind": "judge_unparsable", "message": "no clear CORRECT/INCORRECT verdict"}
                else:
                    line.update(verdict="correct" if verdict else "incorrect", score=1.0 if verdict else 0.0)
        store.append(line)
        counts["n_judge_failed" if line["error"] else "n_judged"] += 1

    try:
        async with asyncio.TaskGroup() as tg:
            for store, r in work:
                tg.create_task(one(store, r))
    except* EngineDead as group:
        raise group.exceptions[0] from None
    return counts


def judge_run_dir(run_dir: Path, cfg: JudgeConfig) -> dict[str, Any]:
    """Judge every open-ended item of the run's current result files not judged yet by this judge, then recompute
    summary.json. Returns the new summary with `judge_pass` counts. The run directory's lock is held throughout: a
    judge pass rewrites summary.json, never while a run writes the directory."""
    from .results.rundir_lock import RunDirLock

    run_dir = Path(run_dir)
    read_summary(run_dir)  # not a result directory: say so before taking its lock
    with RunDirLock(run_dir):
        return _judge_locked(run_dir, cfg)


def _judge_locked(run_dir: Path, cfg: JudgeConfig) -> dict[str, Any]:
    summary = read_summary(run_dir)
    ref, identity = resolve_identity(cfg)
    work: list[tuple[JudgeStore, Mapping[str, Any]]] = []
    stores: list[JudgeStore] = []
    n_skipped = 0
    for b in summary["benchmarks"].values():
        results_path = run_dir / b["results_file"]
        store = judge_store(run_dir, results_path, identity.key)
        done = read_results(store.path)
        todo = []
        for r in drop_stale(read_results(results_path).values(), b):  # samples no longer in the file: skipped
            if not needs_judge(r):
                continue
            prev = done.get(r["sample_id"])
            if prev and prev.get("answer_hash") == answer_hash(r) and not (cfg.retry_failed and prev.get("error")):
                n_skipped += 1
                continue
            todo.append(r)
        if todo:
            stores.append(store)
            work += [(store, r) for r in todo]
    counts = {"n_judged": 0, "n_judge_failed": 0}
    if work:
        backend = _judge_backend(cfg, ref)

        async def main() -> dict[str, int]:
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
    new = recompute_summary(run_dir)
    new["judge_pass"] = {**counts, "n_skipped": n_skipped, "judge_id": identity.judge_id, "key": identity.key}
    return new


def judge_after_run(run_dir: Path, run_cfg: RunConfig, judge_model: str, **overrides: Any) -> dict[str, Any]:
    """Judge a finished run on the run's own backend kind and settings (engine knobs, server URL), then recompute its
    summary. `overrides` set JudgeConfig fields (max_tokens, concurrency, ...)."""
    cfg = JudgeConfig(model=judge_model, backend=run_cfg.backend, engine=run_cfg.engine, server=run_cfg.server,
                      seed=run_cfg.sampling.seed)
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise TypeError(f"JudgeConfig has no field {key!r}")
        setattr(cfg, key, value)
    return judge_run_dir(run_dir, cfg)
