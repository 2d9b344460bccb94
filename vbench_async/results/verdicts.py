"""The LLM judge's verdicts as stored in a run directory, and how they replace offline scores (the read side of
judging; the pass that produces them is `vbench_async/evaluation/judge_pass.py`).

    RUN_DIR/judge/judge.json                          which judges ran, and which one is active
    RUN_DIR/judge/<results file stem>.<key>.jsonl     one line per judged sample (append-only, resumable)

`key` pins the judge: its model fingerprint, the hash of every protocol's prompts and the sampling settings; a
different judge writes a new file. A line also carries the hash of what was judged and its protocol's prompt hash,
so an answer that changed since (a retried sample) counts as unjudged until it is judged again. A verdict replaces
the item's score, and fills the official reading when that reading waited for the judge.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ..sample_result import AppliedVerdict, Result
from ..scoring.judges import judge_for
from .lines import read_lines
from .manifest import iso
from .manifest_record import JudgeRecord
from .result_file import ResultStore, config_hash
from .rundir import JUDGE_DIRNAME, write_json
from .verdict_record import JudgeState, Verdict, read_judge_state

STATE_FILE = "judge.json"


def answer_hash(result: Result) -> str:
    """What the verdict is about: question, reference and model output."""
    blob = json.dumps([result.question, result.answer, result.output], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def is_current(verdict: Verdict, result: Result) -> bool:
    """A verdict counts for `result` while the output it judged and its protocol's prompts are unchanged."""
    return verdict.answer_hash == answer_hash(result) and verdict.prompt_hash == judge_for(result).prompt_hash


@dataclass(frozen=True)
class JudgeIdentity:
    """Everything that makes two verdicts comparable. `key` names the judge's files."""

    model: str
    fingerprint: str
    backend: str
    sampling: Mapping[str, Any]
    prompt_hash: str

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


def read_state(run_dir: Path) -> JudgeState:
    """The run's judge.json (an empty register when no judge ran); RecordError when it is damaged."""
    return read_judge_state(Path(run_dir) / JUDGE_DIRNAME / STATE_FILE)


def active_judge(run_dir: Path) -> JudgeRecord | None:
    """The identity of the judge whose verdicts count, or None when no judge ran."""
    return read_state(run_dir).active_judge()


def activate_judge(run_dir: Path, identity: JudgeIdentity) -> None:
    """Record `identity` in judge.json and make its verdicts the ones that count."""
    state = read_state(run_dir)
    entry = state.judges.get(identity.key) or JudgeRecord.from_json(
        {**identity.to_dict(), "created_at": iso(time.time())}, "judge identity")
    state = state.activated(replace(entry, updated_at=iso(time.time())))
    (Path(run_dir) / JUDGE_DIRNAME).mkdir(parents=True, exist_ok=True)
    write_json(Path(run_dir) / JUDGE_DIRNAME / STATE_FILE, state.to_json())


JUDGED, JUDGE_FAILED, UNJUDGED = "judged", "judge_failed", "unjudged"  # what `judge_line` did to a line


def judge_line(r: Result, judgements: Mapping[str, Verdict | Mapping[str, Any]]) -> tuple[Result, str | None]:
    """One line with its verdict in place of the offline score (a new record; `r` is untouched), and what happened:
    JUDGED, JUDGE_FAILED (the judge could not decide: the offline score stays), UNJUDGED (no verdict for the output
    as it is now), or None (the line needs no judge). The summary judges a result file line by line with it
    (results/streamed.py), so a verdict file and a result file are never both held whole."""
    if not r.needs_judge():
        return r, None
    found = judgements.get(r.sample_id)
    j = Verdict.of(found) if found is not None else None
    if j is None or not is_current(j, r):
        return r, UNJUDGED
    if j.score is None:
        return replace(r, details={**r.details, "judge_error": j.error}), JUDGE_FAILED
    official = r.reading("official")
    applied = AppliedVerdict(verdict=j.verdict, judge_id=j.judge_id, prompt_hash=j.prompt_hash, protocol=j.protocol,
                             offline_score=r.score)
    r = replace(r, score=j.score, details={**r.details, "judge": applied.to_dict()})  # the judged value is the score
    if official is not None and official.needs_judge:
        r.official = replace(official, value=j.score, needs_judge=False, judged=True).to_dict()
    return r, JUDGED


def judge_info(identity: JudgeRecord | Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    """The summary's "judge" block: which judge, and how many lines it judged, failed on and has yet to judge."""
    judge = JudgeRecord.of(identity)
    return {"judge_id": judge.judge_id, "prompt_hash": judge.prompt_hash, "key": judge.key,
            "n_judged": counts.get(JUDGED, 0), "n_judge_failed": counts.get(JUDGE_FAILED, 0),
            "n_unjudged": counts.get(UNJUDGED, 0)}


def apply_judgements(results: list[Result], judgements: Mapping[str, Verdict | Mapping[str, Any]],
                     identity: JudgeRecord | Mapping[str, Any]) -> tuple[list[Result], dict[str, Any]]:
    """Results with the verdicts in place of the offline scores, and counts for the summary."""
    out, counts = [], {JUDGED: 0, JUDGE_FAILED: 0, UNJUDGED: 0}
    for r in results:
        r, outcome = judge_line(r, judgements)
        if outcome is not None:
            counts[outcome] += 1
        out.append(r)
    return out, judge_info(identity, counts)


def read_verdicts(store: JudgeStore) -> dict[str, Verdict]:
    """A judge's verdict lines for one result file, keyed by sample id (invalid lines reported, left out)."""
    return read_lines(store.path, view=Verdict.read)


# What judge_line reads of a verdict.
_APPLIED = ("sample_id", "answer_hash", "prompt_hash", "score", "error", "verdict", "judge_id", "protocol")


def verdicts_to_apply(store: JudgeStore) -> dict[str, Verdict]:
    """`read_verdicts`, each line cut to what `judge_line` reads: the judge's own output text stays on disk."""
    return read_lines(store.path, view=lambda v: Verdict.read({k: v[k] for k in _APPLIED if k in v}))


def apply_active_judge(run_dir: Path, results_path: Path, results: list[Result]
                       ) -> tuple[list[Result], dict[str, Any] | None]:
    """`results` with the active judge's verdicts applied (unchanged, and None, when no judge ran)."""
    identity = active_judge(Path(run_dir))
    if identity is None or not any(r.needs_judge() for r in results):
        return list(results), None  # the same records: callers only read them
    store = judge_store(Path(run_dir), Path(results_path), str(identity.key))
    merged, info = apply_judgements(results, verdicts_to_apply(store), identity)
    info["file"] = str(store.path.relative_to(run_dir))
    return merged, info
