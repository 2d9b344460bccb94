"""The closing table of `make demo-rl` (scripts/demo_rl.py): both runs' scores with the trained one's 95% interval
and chance level beside them, what the trained score means against chance, and a warning for a model that gives one
answer to (nearly) every question. Every figure is read from the two runs' own summaries and result files."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from ..results.answer_spread import AnswerSpread, run_answer_spreads
from ..results.rundir import read_summary
from ..results.summary_record import BenchmarkSummary, Summary
from .output import pct, print_rows


@dataclass
class RunReading:
    """One evaluated run: its summary and each benchmark's answer spread."""

    name: str
    summary: Summary
    spreads: dict[str, AnswerSpread]

    def __post_init__(self) -> None:
        self.summary = Summary.of(self.summary)  # a caller's in-memory summary dict is read once, here

    @classmethod
    def of(cls, name: str, run_dir: Path) -> RunReading:
        summary = read_summary(Path(run_dir))
        return cls(name, summary, run_answer_spreads(run_dir, summary))

    def block(self, benchmark: str) -> BenchmarkSummary:
        return self.summary.benchmarks[benchmark]


def against_chance(block: BenchmarkSummary) -> str | None:
    """Where a score's 95% interval lies against chance level: above, below, or around it (None without both)."""
    chance, ci = block.chance, block.interval
    low, high = (ci.low, ci.high) if ci is not None else (None, None)
    if chance is None or low is None or high is None:
        return None
    if low > chance:
        return "above chance"
    if high < chance:
        return "below chance"
    return "not distinguishable from chance (the interval holds it)"


def rl_table(before: RunReading, after: RunReading, benchmarks: tuple[str, ...]) -> str:
    """The table and its notes, as the demo prints them."""
    rows: list[tuple[str, ...]] = [("benchmark", before.name, after.name, f"{after.name} 95% CI", "chance", "n")]
    notes = []
    for b in benchmarks:
        a = after.block(b)
        ci = a.interval
        rows.append((b, pct(before.block(b).score), pct(a.score),
                     f"[{pct(ci.low)}, {pct(ci.high)}]" if ci is not None and ci.to_json() else "-",
                     pct(a.chance) if a.chance is not None else "~0", str(a.n_total)))
        where = against_chance(a)
        if where:
            notes.append(f"{after.name} on {b}: {pct(a.score)}, {where}")
        for run in (before, after):
            spread = run.spreads.get(b)
            warning = spread.warning(b) if spread else None
            if warning:
                notes.append(f"WARNING {run.name} {warning}")
    out = io.StringIO()
    print_rows(rows, file=out)
    notes.insert(0, "chance: the score of a uniform guess among each question's options (yes/no: 50); 95% CI: the "
                    "trained score's interval over these few questions, clustered by video")
    for note in notes:
        print(f"  {note}", file=out)
    return out.getvalue()
