"""What a judge pass says on the console: what it judged, each kind of failure with its reason and the next step,
or that nothing in the run needed a judge; and its exit code (1 when items waited and none got a usable verdict)."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import TextIO

from ..evaluation.judge_outcome import JudgeFailure, JudgePass
from ..redact import scrub_text

_EXAMPLES = 2  # failed items named per kind
_AGAIN = "then judge them again: the same command with --retry-failed"
# Judge failure kind -> what to do about it.
JUDGE_FIXES: dict[str, str] = {
    "judge_unparsable": "the judge's replies held no verdict its protocol reads: use a judge model that follows "
                        "instructions (--judge-model), or raise --max-tokens if it reasons before it answers; "
                        + _AGAIN,
    "judge_engine_error": "the judge engine failed the request (its log: {log}); " + _AGAIN,
    "judge_protocol_error": "the protocol failed on these items (a bug: the traceback is in {log}); please report "
                            "it with the item",
    "judge_needs_release_fields": "the protocol needs fields of the official release the records lack: evaluate "
                                  "on the official annotation files (`vbench-async data fetch NAME`)",
    "judge_record_invalid": "the record's fields do not fit the protocol: fix the annotation record, re-run, then "
                            "judge again",
}
_OTHER = "see the verdict lines in {verdicts}"


def _example(f: JudgeFailure) -> str:
    said = f" (the judge said: {scrub_text(' '.join(f.reply.split()))[:80]!r})" if f.reply is not None else ""
    return f"{f.benchmark} {f.sample_id}: {scrub_text(f.message)[:160]}{said}"


def print_failures(failures: list[JudgeFailure], what: str, run_dir: Path, file: TextIO) -> None:
    """Each kind of failure: how many, the reason (the first items' messages) and the next step."""
    by_kind: dict[str, list[JudgeFailure]] = defaultdict(list)
    for f in failures:
        by_kind[f.kind].append(f)
    print(f"{len(failures)} {what}:", file=file)
    for kind, items in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        fix = JUDGE_FIXES.get(kind, _OTHER).format(log=Path(run_dir) / "logs" / "engine.log",
                                                   verdicts=Path(run_dir) / "judge")
        print(f"  {len(items)} {kind}: {fix}", file=file)
        for f in items[:_EXAMPLES]:
            print(f"    {_example(f)}", file=file)
        if len(items) > _EXAMPLES:
            print(f"    ... {len(items) - _EXAMPLES} more in {Path(run_dir) / 'judge'}", file=file)


def judge_pass_line(jp: JudgePass, run_dir: Path) -> str:
    """One line: what the pass judged, or that nothing in the run waits for a judge (never a bare "0 judged")."""
    earlier = jp.n_skipped_failed
    if not jp.n_waiting:
        return (f"judge {jp.judge_id}: nothing to judge: no answer in {run_dir} waits for a judge (every "
                "benchmark in it is scored by rule); no judge engine was started")
    return (f"judge {jp.judge_id}: {jp.n_judged} judged, {jp.n_judge_failed} judge failure(s), "
            f"{jp.n_skipped - earlier} already judged"
            + (f", {earlier} judged before without a usable verdict (--retry-failed judges them again)"
               if earlier else ""))


def report_judge_failures(jp: JudgePass, run_dir: Path, file: TextIO | None = None) -> int:
    """Each kind of judge failure (this pass's, then earlier passes' still unresolved) with its reason and next
    step; returns the exit code: 1 when items waited for a judge and none has a usable verdict, else 0."""
    file = file or sys.stderr
    if jp.failures:
        print_failures(jp.failures, "judge failure(s) in this pass", run_dir, file)
    if jp.earlier_failures:
        print_failures(jp.earlier_failures, "item(s) judged before without a usable verdict", run_dir, file)
    waiting = jp.n_waiting
    if waiting and jp.n_usable == 0:
        print(f"no item of {run_dir} got a usable verdict ({waiting} waited for one): their scores stay offline "
              "figures; see the failures above", file=file)
        return 1
    return 0
