"""What a judge pass (`judge_pass.py`) hands back: the recomputed summary and the pass's own counts, with each item
the judge could not decide. The console (`cli/judge_report.py`) reads them; a job's record carries `to_json`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..results.summary_record import Summary
from ..results.verdict_record import Verdict


@dataclass(frozen=True)
class JudgeFailure:
    """An item without a usable verdict, as the console reports it: which item, the failure's kind and reason, and
    what the judge replied (a reply the protocol could not read is the usual reason)."""

    benchmark: str | None
    sample_id: str
    kind: str
    message: str
    reply: str | None

    @classmethod
    def of(cls, verdict: Verdict, benchmark: str | None = None) -> JudgeFailure:
        """The failure a failed verdict line records; `benchmark` stands in where the line names none."""
        return cls(benchmark=verdict.benchmark or benchmark, sample_id=verdict.sample_id, kind=verdict.error_kind,
                   message=verdict.error_message, reply=verdict.reply)


@dataclass(frozen=True, kw_only=True)
class JudgePass:
    """One pass's counts: judged now, failed now (`failures`), skipped as judged before by this judge (of them,
    `n_skipped_failed` without a usable verdict: `earlier_failures`). Fields in the order a job's record writes."""

    n_judged: int = 0
    n_judge_failed: int = 0
    failures: list[JudgeFailure] = field(default_factory=list)
    n_skipped: int = 0
    n_skipped_failed: int = 0
    earlier_failures: list[JudgeFailure] = field(default_factory=list)
    judge_id: str
    key: str

    @property
    def n_waiting(self) -> int:
        """Items that waited for a judge: judged or failed in this pass, or judged before."""
        return self.n_judged + self.n_judge_failed + self.n_skipped

    @property
    def n_usable(self) -> int:
        """Items with a usable verdict: judged now, or judged before with one."""
        return self.n_judged + self.n_skipped - self.n_skipped_failed

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class JudgedRun:
    """The run's summary as recomputed with the verdicts, and the pass that produced them."""

    summary: Summary
    judge_pass: JudgePass

    def to_json(self) -> dict[str, Any]:
        """The summary's JSON with the pass's counts beside it (what a job's record carries)."""
        return {**self.summary.to_json(), "judge_pass": self.judge_pass.to_json()}
