"""The judge's files as declared records: a verdict line of `RUN_DIR/judge/*.jsonl` (`Verdict`) and the judges'
register `RUN_DIR/judge/judge.json` (`JudgeState`). The judge pass writes them with `to_json`; `results/verdicts.py`
reads them back here, so writer and reader share one declaration. Where they live and how a verdict replaces a
score: `results/verdicts.py`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..record_io import OutputRecord, RecordError, always, read_record, type_problem
from ..sample_result import error_problem, record_problem, score_problem
from .manifest_record import JudgeRecord

# The fields of a verdict line that `verdict_problem` does not check, with their JSON type: a value of another type (a
# hand-edited line) reads as absent, as if the line lacked it.
_UNCHECKED: dict[str, type] = {"benchmark": str, "protocol": str, "prompt_hash": str, "steps": list, "info": dict}


@dataclass(frozen=True)
class Verdict:
    """One judged item: what was judged (`answer_hash`, the protocol's `prompt_hash`), each prompt round's reply
    (`steps`), and the outcome: a score with its verdict, or an error (score None). Fields in the order written."""

    sample_id: str
    benchmark: str | None = None
    judge_id: str | None = None
    protocol: str | None = None
    prompt_hash: str | None = None
    answer_hash: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"stage", "output"} per prompt sent
    output: str | None = None  # the last reply
    verdict: str | None = None
    score: float | None = None
    error: dict[str, str] | None = None  # {"kind", "message"}: the judge could not decide
    info: dict[str, Any] = field(default_factory=dict)  # what the protocol read on the way (its own keys)
    prompt_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def read(cls, line: Mapping[str, Any]) -> Verdict:
        """A verdict line the line reader accepted (`results.lines`) as the record; a field it lacks (an older
        line, a line cut to what a reader needs) takes its default."""
        values = {f.name: line[f.name] for f in dataclasses.fields(cls) if line.get(f.name) is not None}
        for name, kind in _UNCHECKED.items():
            if name in values and not isinstance(values[name], kind):
                del values[name]
        return cls(**values)

    @classmethod
    def of(cls, value: Verdict | Mapping[str, Any]) -> Verdict:
        """`value` as a Verdict (an in-memory mapping, as tests hand verdicts in, is read once)."""
        return value if isinstance(value, Verdict) else cls.read(value)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def error_kind(self) -> str:
        return str(self.error.get("kind") or "unknown") if self.error else "unknown"

    @property
    def error_message(self) -> str:
        return str(self.error.get("message") or "") if self.error else ""

    @property
    def reply(self) -> str | None:
        """What the judge said: the reply the protocol could not read when it names one, else the last reply."""
        reply = self.info.get("reply") or self.output
        return reply if isinstance(reply, str) else None


def verdict_problem(line: Any) -> str | None:
    """Why `line` is not a verdict line, or None when it is: the fields `Verdict` declares (but `_UNCHECKED`) against
    their types, a score a finite number in [0, 1], an error with a kind and a message."""
    if (problem := record_problem(line)) is not None:
        return problem
    checked = {k: v for k, v in line.items() if k not in _UNCHECKED}
    return type_problem(Verdict, checked) or score_problem(line.get("score")) or error_problem(line.get("error"))


@dataclass
class JudgeState(OutputRecord):
    """judge/judge.json: every judge that ran on the run (by key), and the key of the one whose verdicts count."""

    active: str | None = always()
    judges: dict[str, JudgeRecord] = always(default_factory=dict)

    def active_judge(self) -> JudgeRecord | None:
        return self.judges.get(self.active) if self.active else None

    def activated(self, entry: JudgeRecord) -> JudgeState:
        """The register with `entry` recorded under its key and made the active judge."""
        key = str(entry.key)
        return replace(self, active=key, judges={**self.judges, key: entry})


def read_judge_state(path: Path) -> JudgeState:
    """judge.json as the record (an empty register when there is none); RecordError, naming the file and what to
    do, when it is unreadable, not JSON or not the register."""
    try:
        return read_record(JudgeState, path)
    except FileNotFoundError:
        return JudgeState()
    except RecordError as exc:
        raise RecordError(f"{exc}; delete it and judge the run again") from exc
