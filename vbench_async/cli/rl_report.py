"""The closing table of `make demo-rl` (scripts/demo_rl.py): both runs' scores with the trained one's 95% interval
and chance level beside them, what the trained score means against chance, and a warning for a model that gives one
answer to (nearly) every question. Every figure is read from the two runs' own summaries and result files."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results.answer_spread import AnswerSpread, run_answer_spreads
from .output import pct, print_rows


@dataclass
class RunReading:
    """One evaluated run: its summary and each benchmark's answer spread."""

    name: str
    summary: dict[str, Any]
    spreads: dict[str, AnswerSpread]

    @classmethod
    def of(cls, name: str, run_dir: Path) -> RunReading:
        summary = json.loads((Path(run_dir) / "summary.json").read_text(encoding="utf-8"))
        return cls(name, summary, run_answer_spreads(run_dir, summary))

    def block(self, benchmark: str) -> dict[str, Any]:
        block: dict[str, Any] = self.summary["benchmarks"][benchmark]
        return block


def against_chance(block: dict[str, Any]) -> str | None:
    """Where a score's 95% interval lies against chance level: above, below, or around it (None without both)."""
    chance, ci = block.get("chance"), block.get("interval") or {}
    low, high = ci.get("low"), ci.get("high")
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
        ci = a.get("interval") or {}
        rows.append((b, pct(before.block(b).get("score")), pct(a.get("score")),
                     f"[{pct(ci.get('low'))}, {pct(ci.get('high'))}]" if ci else "-",
                     pct(a.get("chance")) if a.get("chance") is not None else "~0", str(a.get("n_total", 0))))
        where = against_chance(a)
        if where:
            notes.append(f"{after.name} on {b}: {pct(a.get('score'))}, {where}")
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
