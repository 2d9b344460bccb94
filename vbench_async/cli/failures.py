"""The end of `run` when samples failed: how many of each kind, and what to do about each."""

from __future__ import annotations

import functools
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, TextIO

from ..failure_kinds import FailureKind
from ..redact import scrub_text
from ..results.summary_record import Summary
from ..sample_result import Result

if TYPE_CHECKING:
    from ..benchmarks.selection import Selection

# Kinds whose samples `data check` can explain (their files are missing or unreadable).
_DATA_KINDS = frozenset({FailureKind.VIDEO_MISSING, FailureKind.IMAGE_ERROR, FailureKind.VIDEO_EMPTY,
                         FailureKind.NO_VIDEO_STREAM, FailureKind.DECODE_ERROR})
_EXAMPLES = 3  # failed samples named per kind
_OTHER = "see the result lines' 'error' field"  # a kind this version does not know (an older file's)


def fix_for(kind: str) -> str:
    """What to do about a failure of this kind: its hint in the one table of kinds (`failure_kinds.FailureKind`)."""
    known = FailureKind.named(kind)
    return known.hint if known is not None else _OTHER


@dataclass(frozen=True)
class FailedSample:
    """One failed sample as the end of a run names it."""

    benchmark: str
    sample_id: str
    kind: str
    message: str
    video: str | None  # the video file as the run resolved it, else as the annotation names it

    @classmethod
    def of(cls, benchmark: str, r: Result) -> FailedSample | None:
        """The failure a result line records (None when the sample did not fail)."""
        if not r.error:
            return None
        seen = r.frames_seen()
        return cls(benchmark, r.sample_id, r.error_kind or "unknown", r.error_message,
                   (seen.source if seen is not None else None) or r.video)


def _failure(benchmark: str, line: dict[str, Any]) -> FailedSample | None:
    # Each line cut to its failure as it is read: a large file is never held whole.
    return FailedSample.of(benchmark, Result.read(line))


def failure_kinds(run_dir: Path, summary: Summary | Mapping[str, Any]) -> Counter[str]:
    """Failed samples by error kind, over the result files of the benchmarks that have failures."""
    return failed_samples(run_dir, summary)[0]


def failed_samples(run_dir: Path, summary: Summary | Mapping[str, Any]
                   ) -> tuple[Counter[str], dict[str, list[FailedSample]]]:
    """Failed samples by error kind, and the first few of each kind (benchmark, sample id, video, message)."""
    from ..results.lines import read_lines

    kinds: Counter[str] = Counter()
    examples: dict[str, list[FailedSample]] = {}
    for bid, b in Summary.of(summary).benchmarks.items():
        if not b.n_failed or not b.results_file:
            continue
        path = Path(run_dir) / b.results_file
        if not path.exists():
            continue
        stale = set(b.stale_ids)  # lines of ids no longer in the annotation file: not this run's
        for failed in read_lines(path, view=functools.partial(_failure, bid)).values():
            if failed is None or failed.sample_id in stale:
                continue
            kinds[failed.kind] += 1
            if len(examples.setdefault(failed.kind, [])) < _EXAMPLES:
                examples[failed.kind].append(failed)
    return kinds, examples


def data_check_command(summary: Summary | Mapping[str, Any], kinds: Counter[str],
                       selection: Selection | None) -> str | None:
    """A `data check` of the benchmarks whose samples failed for their data, with every flag the run found them
    with (data root, card folders, paths outside the root): ready to paste (None when no failure is the data's)."""
    if not any(k in _DATA_KINDS for k in kinds):
        return None
    benches = [bid for bid, b in Summary.of(summary).benchmarks.items() if b.n_failed]
    parts = ["vbench-async", "data", "check", *benches]
    if selection is not None:
        if selection.data_root:
            parts += ["--data-root", str(selection.data_root)]
        for folder in selection.include:
            parts += ["--include", str(folder)]
        if selection.allow_outside_root:
            parts.append("--allow-outside-root")
    return shlex.join(parts)


def print_failures(run_dir: Path, summary: Summary | Mapping[str, Any], file: TextIO | None = None,
                   selection: Selection | None = None) -> int:
    """Say how many samples failed, by kind, each with its fix and the first samples (and files) of the kind;
    returns the number failed (from the summary). `selection`: the run's, for the `data check` command."""
    file = file or sys.stderr
    summary = Summary.of(summary)
    failed = summary.n_failed()
    if not failed:
        return 0
    kinds, examples = failed_samples(run_dir, summary)
    print(f"{failed} sample(s) failed:", file=file)
    for kind, n in kinds.most_common():
        print(f"  {n} {kind}: {fix_for(kind)}", file=file)
        for ex in examples.get(kind, []):
            where = f" ({ex.video})" if ex.video else ""
            message = scrub_text(ex.message).splitlines()[0][:160] if ex.message else ""
            print(f"    {ex.benchmark} {ex.sample_id}{where}{': ' + message if message else ''}", file=file)
        if n > len(examples.get(kind, [])):
            print(f"    ... {n - len(examples.get(kind, []))} more in {Path(run_dir) / 'results'}", file=file)
    check = data_check_command(summary, kinds, selection)
    if check:
        print(f"  check the data: {check}", file=file)
    if not kinds:
        print(f"  {_OTHER} (in {Path(run_dir) / 'results'})", file=file)
    return failed
