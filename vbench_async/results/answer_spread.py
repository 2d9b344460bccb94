"""How varied a model's answers are: a model that gives one answer to (nearly) every question scores the share of
questions whose truth is that answer, which can look like learning while it reads nothing of the video."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..sample_result import Result

if TYPE_CHECKING:
    from .summary_record import Summary

CONSTANT_SHARE = 0.9  # one answer to at least this share of the answered questions is a constant answer


@dataclass(frozen=True)
class AnswerSpread:
    """The most frequent answer among the answered (not failed) samples, and how many gave it."""

    n_answered: int
    top: str | None
    n_top: int
    top_read: bool = True  # the scorer read `top` as an answer (not text it found no answer in)

    @property
    def share(self) -> float:
        return self.n_top / self.n_answered if self.n_answered else 0.0

    def constant(self, threshold: float = CONSTANT_SHARE) -> bool:
        """One answer to at least `threshold` of the questions (two or more: one question says nothing)."""
        return self.n_answered >= 2 and self.share >= threshold

    def constant_answer(self, threshold: float = CONSTANT_SHARE) -> str | None:
        """The answer given to (nearly) every question, or None; one unreadable text repeated is no answer (it
        scores 0, which the score says already)."""
        return self.top if self.constant(threshold) and self.top_read else None

    def warning(self, benchmark: str, threshold: float = CONSTANT_SHARE) -> str | None:
        """One line saying the model answers the same whatever it is asked, or None."""
        if self.constant_answer(threshold) is None:
            return None
        return (f"{benchmark}: {self.n_top} of {self.n_answered} answers are {self.top!r}: a constant answer, so the "
                f"score is the share of questions whose truth is {self.top!r}, not a sign the model reads the video")


def _answer(r: Result) -> str:
    """What the model answered: the answer the scorer read from the output, else the output itself."""
    text = r.extracted if r.extracted is not None else (r.output or "")
    return " ".join(str(text).split())


def answer_spread(results: Iterable[Result]) -> AnswerSpread:
    """The spread of `results`' answers (failed samples left out; answers compared case-insensitively)."""
    counts: Counter[str] = Counter()
    spelled: dict[str, str] = {}
    read: set[str] = set()
    for r in results:
        if r.failed:
            continue
        answer = _answer(r)
        key = answer.casefold()
        counts[key] += 1
        spelled.setdefault(key, answer)
        if r.extracted is not None:
            read.add(key)
    if not counts:
        return AnswerSpread(0, None, 0)
    key, n = counts.most_common(1)[0]
    return AnswerSpread(sum(counts.values()), spelled[key], n, key in read)


def run_answer_spreads(run_dir: Path, summary: Summary) -> dict[str, AnswerSpread]:
    """Each benchmark's answer spread, from the result file its summary block names (its stale lines left out)."""
    from .current import drop_stale
    from .result_file import read_results

    out = {}
    for bid, block in summary.benchmarks.items():
        path = Path(run_dir) / str(block.results_file or "")
        if block.results_file and path.is_file():
            out[bid] = answer_spread(drop_stale(read_results(path).values(), block))
    return out
