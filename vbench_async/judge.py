"""LLM-as-judge for open-ended answers: a second pass over a run directory, through the project's own backends.

For every result line whose `details.needs_judge` is set (open-ended items scored offline by ROUGE-L) and that did not
fail, the judge model sees the question, the reference answer and the model's answer and says CORRECT or INCORRECT.

    RUN_DIR/judge/judge.json                          which judges ran, and which one is active
    RUN_DIR/judge/<results file stem>.<key>.jsonl     one line per judged sample (append-only, resumable)

`key` pins the judge: its model fingerprint, the prompt hash and the sampling settings; a different judge writes a new
file. A line also carries the hash of what was judged, so an answer that changed since (a retried sample) is judged
again. An unparsable verdict is recorded as a judge failure: the item keeps its offline score and stays counted in
`n_needs_judge`, never becomes a silent zero. Then the run's summary is recomputed with the verdicts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import SampleError, UserError
from .results.manifest import iso
from .results.store import ResultStore, config_hash, read_results

log = logging.getLogger(__name__)

JUDGE_DIRNAME = "judge"
STATE_FILE = "judge.json"

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


def reference_text(answer: Any) -> str:
    """The reference answer as a reader would say it: the inside of <answer>...</answer> when present."""
    text = str(answer or "")
    m = _ANSWER_TAG.search(text)
    return m.group(1).strip() if m else text.strip()


def needs_judge(result: Mapping[str, Any]) -> bool:
    return not result.get("error") and bool((result.get("details") or {}).get("needs_judge"))


def answer_hash(result: Mapping[str, Any]) -> str:
    """What the verdict is about: question, reference and model output."""
    blob = json.dumps([result.get("question"), result.get("answer"), result.get("output")], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------- identity + files


@dataclass(frozen=True)
class JudgeIdentity:
    """Everything that makes two verdicts comparable. `key` names the judge's files."""

    model: str
    fingerprint: str
    backend: str
    sampling: Mapping[str, Any]
    prompt_hash: str = PROMPT_HASH

    @property
    def judge_id(self) -> str:
        return f"{self.model}@{self.fingerprint[:16]}"

    @property
    def key(self) -> str:
        return config_hash({"fingerprint": self.fingerprint, "prompt": self.prompt_hash, "sampling": self.sampling})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "judge_id": self.judge_id, "key": self.key, "sampling": dict(self.sampling)}


@dataclass
class JudgeStore(ResultStore):
    """The judge's verdicts for one result file: the result store's locking, fsync and torn-tail handling."""

    results_path: Path = Path()

    @property
    def path(self) -> Path:
        return self.run_dir / JUDGE_DIRNAME / f"{self.results_path.stem}.{self.config_hash}.jsonl"


def judge_store(run_dir: Path, results_path: Path, key: str) -> JudgeStore:
    return JudgeStore(run_dir=run_dir, benchmark_id="judge", config_hash=key, results_path=results_path)


def read_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / JUDGE_DIRNAME / STATE_FILE
    if not path.exists():
        return {"active": None, "judges": {}}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc}); delete it and re-run the judge") from exc


def active_judge(run_dir: Path) -> dict[str, Any] | None:
    """The identity (as a dict) of the judge whose verdicts count, or None when no judge ran."""
    state = read_state(run_dir)
    return state["judges"].get(state["active"]) if state.get("active") else None


def _write_state(run_dir: Path, identity: JudgeIdentity) -> None:
    from .results.report import _write_json

    state = read_state(run_dir)
    entry = state["judges"].get(identity.key) or {**identity.to_dict(), "created_at": iso(time.time())}
    entry["updated_at"] = iso(time.time())
    state["judges"][identity.key] = entry
    state["active"] = identity.key
    (run_dir / JUDGE_DIRNAME).mkdir(parents=True, exist_ok=True)
    _write_json(run_dir / JUDGE_DIRNAME / STATE_FILE, state)


# ------------------------------------------------------------------------------------------ applying verdicts


def apply_judgements(results: list[Mapping[str, Any]], judgements: Mapping[str, Mapping[str, Any]],
                     identity: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Results with the verdicts in place of the offline scores, and counts for the summary."""
    out, judged, failed, unjudged = [], 0, 0, 0
    for r in results:
        r = dict(r)
        if needs_judge(r):
            j = judgements.get(str(r.get("sample_id")))
            if j is None or j.get("answer_hash") != answer_hash(r):
                unjudged += 1
            elif j.get("score") is None:
                failed += 1
                r["details"] = {**r["details"], "judge_error": j.get("error")}
            else:
                judged += 1
                r["details"] = {**r["details"], "judge": {
                    "verdict": j["verdict"], "judge_id": j["judge_id"], "prompt_hash": j["prompt_hash"],
                    "offline_score": r.get("score")}}
                r["score"] = j["score"]
        out.append(r)
    info = {"judge_id": identity.get("judge_id"), "prompt_hash": identity.get("prompt_hash"),
            "key": identity.get("key"), "n_judged": judged, "n_judge_failed": failed, "n_unjudged": unjudged}
    return out, info


def apply_active_judge(run_dir: Path, results_path: Path, results: list[Mapping[str, Any]]
                       ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """`results` with the active judge's verdicts applied (unchanged, and None, when no judge ran)."""
    identity = active_judge(Path(run_dir))
    if identity is None or not any(needs_judge(r) for r in results):
        return list(results), None  # the same dicts: callers only read them
    store = judge_store(Path(run_dir), Path(results_path), identity["key"])
    merged, info = apply_judgements(results, read_results(store.path), identity)
    info["file"] = str(store.path.relative_to(run_dir))
    return merged, info


# ------------------------------------------------------------------------------------------------ the pass


@dataclass
class JudgeConfig:
    model: str
    backend: str = "vllm"
    backend_options: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 32  # a verdict is one line; reasoning judges need more (--judge-max-tokens)
    seed: int = 0
    concurrency: int = 8
    retry_failed: bool = False
    rebuild_site: bool = True


def resolve_identity(cfg: JudgeConfig) -> tuple[Any, JudgeIdentity]:
    """(model ref for the backend, identity). A served model (openai backend) is known by its name only."""
    from .backends.base import SamplingParams
    from .models import ModelRef, resolve

    sampling = SamplingParams(temperature=0.0, max_tokens=cfg.max_tokens, seed=cfg.seed).to_dict()
    if cfg.backend == "openai":
        ref = ModelRef(name=cfg.model, path=cfg.model, family="served", fingerprint=f"served:{cfg.model}")
    else:
        ref = resolve(cfg.model)
    return ref, JudgeIdentity(model=cfg.model, fingerprint=ref.fingerprint, backend=cfg.backend, sampling=sampling)


def _make_backend(cfg: JudgeConfig, ref: Any, identity: JudgeIdentity) -> Any:
    from .backends.base import SamplingParams
    from .runner import RunConfig, make_backend

    options = dict(cfg.backend_options)
    if cfg.backend == "vllm":
        options.setdefault("max_videos", 0)  # text-only requests: no multimodal profiling at engine start
        options.setdefault("max_images", 0)
    if cfg.backend == "openai":
        options.setdefault("concurrency", cfg.concurrency)
        options.pop("served_model", None)  # the evaluated model's name on the server; the judge is cfg.model
    run_cfg = RunConfig(model=cfg.model, backend=cfg.backend, backend_options=options,
                        sampling=SamplingParams(**identity.sampling))
    return make_backend(run_cfg, ref, [])


async def judge_pending(backend: Any, identity: JudgeIdentity, work: list[tuple[JudgeStore, Mapping[str, Any]]],
                        concurrency: int = 8) -> dict[str, int]:
    """Judge each (store, result) and append one verdict line per item. A dead engine stops the pass (finished lines
    stay); any other per-item problem is recorded as a judge failure."""
    from .backends.base import EngineDead, Request, SamplingParams

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
    summary.json (and the run's own site). Returns the new summary with `judge_pass` counts. `run --judge-model`
    calls this after the evaluation."""
    from .results.rundir_lock import RunDirLock

    run_dir = Path(run_dir)
    _read_summary(run_dir)  # not a result directory: say so before taking its lock
    with RunDirLock(run_dir):  # a judge pass rewrites summary.json: never while a run writes the directory
        return _judge_locked(run_dir, cfg)


def _judge_locked(run_dir: Path, cfg: JudgeConfig) -> dict[str, Any]:
    summary = _read_summary(run_dir)
    ref, identity = resolve_identity(cfg)
    work: list[tuple[JudgeStore, Mapping[str, Any]]] = []
    stores: list[JudgeStore] = []
    n_skipped = 0
    for b in summary["benchmarks"].values():
        results_path = run_dir / b["results_file"]
        store = judge_store(run_dir, results_path, identity.key)
        done = read_results(store.path)
        todo = []
        for r in read_results(results_path).values():
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
        backend = _make_backend(cfg, ref, identity)

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
    _write_state(run_dir, identity)
    new = recompute_summary(run_dir, rebuild_site=cfg.rebuild_site)
    new["judge_pass"] = {**counts, "n_skipped": n_skipped, "judge_id": identity.judge_id, "key": identity.key}
    return new


def judge_after_run(run_dir: Path, run_cfg: Any, judge_model: str, **overrides: Any) -> dict[str, Any]:
    """`run --judge-model M`: judge a finished run on the run's own backend kind and settings (engine knobs, server
    URL), then recompute its summary and site. `overrides` set JudgeConfig fields (max_tokens, concurrency, ...)."""
    options = {k: v for k, v in dict(run_cfg.backend_options).items() if k != "served_model"}
    cfg = JudgeConfig(model=judge_model, backend=run_cfg.backend, backend_options=options,
                      seed=run_cfg.sampling.seed, rebuild_site=bool(getattr(run_cfg, "write_site", True)))
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise TypeError(f"JudgeConfig has no field {key!r}")
        setattr(cfg, key, value)
    return judge_run_dir(run_dir, cfg)


def recompute_summary(run_dir: Path, rebuild_site: bool = True) -> dict[str, Any]:
    """Re-aggregate every benchmark of summary.json from its result file with the active judge's verdicts."""
    from .benchmarks import get_benchmark
    from .results.current import drop_stale, is_complete
    from .results.lines import mark_bad_lines
    from .results.report import MANIFEST_FILE, SUMMARY_FILE, _write_json

    run_dir = Path(run_dir)
    summary = _read_summary(run_dir)
    for bid, old in list(summary["benchmarks"].items()):
        results_path = run_dir / old["results_file"]
        bad: list = []
        current = drop_stale(read_results(results_path, problems=bad).values(), old)
        results, info = apply_active_judge(run_dir, results_path, current)
        agg = get_benchmark(bid).aggregate(results)
        agg.update({k: old[k] for k in ("n_expected", "results_file", "config_hash", "n_stale", "stale_ids")
                    if k in old})
        # Counted again, as the leaderboard counts: a line damaged since the run no longer passes for a result.
        agg["complete"] = is_complete(results, int(old.get("n_expected") or 0), old.get("complete") is not False)
        mark_bad_lines(agg, bad)
        if info:
            agg["judge"] = info
        summary["benchmarks"][bid] = agg
    _write_json(run_dir / SUMMARY_FILE, summary)
    manifest_path = run_dir / MANIFEST_FILE
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest["judge"] = active_judge(run_dir)
        _write_json(manifest_path, manifest)
    if rebuild_site and (run_dir / "leaderboard" / "index.html").exists():
        from .leaderboard import build_site

        build_site([run_dir], run_dir / "leaderboard")
    return summary


def _read_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "summary.json"
    if not path.exists():
        raise UserError(f"{run_dir} is not a result directory (no summary.json); run `vbench-async run` first")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(summary.get("benchmarks"), dict):
        raise UserError(f"{path} has no 'benchmarks' mapping: not a vbench-async summary")
    return summary
