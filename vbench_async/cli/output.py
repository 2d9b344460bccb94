"""What the commands print and publish after the library has done the work: the score table and a run's own site."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from ..results.rundir import site_dir
from ..results.summaries import benchmark_status


def print_rows(rows: list[tuple[str, ...]], left: tuple[int, ...] = (0,), file: TextIO | None = None) -> None:
    """A plain-text table: the first row is the header; columns in `left` are left-aligned, the others right."""
    file = file or sys.stdout  # looked up per call: tests (and callers) may have replaced sys.stdout
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j in left else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))),
              file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


def print_table(summary: dict[str, Any], file: TextIO | None = None) -> None:
    """The score table of a summary: one row per benchmark."""
    rows = [("benchmark", "score", "n_total", "failed", "status")]
    for bid, b in summary["benchmarks"].items():
        score = b.get("score")
        status = b.get("status") or benchmark_status(b)
        rows.append((
            bid,
            f"{100 * score:.2f}" if isinstance(score, (int, float)) and status != "failed" else "-",
            str(b.get("n_total", 0)),
            str(b.get("n_failed", 0)),
            {"complete": "complete", "failed": "ALL FAILED"}.get(status, "PARTIAL"),
        ))
    for bid in summary.get("not_run") or {}:
        rows.append((bid, "-", "0", "0", "NOT RUN (no data)"))
    print_rows(rows, file=file)


def write_run_site(run_dir: Path) -> Path:
    """(Re)build the run directory's own leaderboard; returns its index.html."""
    from ..leaderboard import build_site  # pandas and jinja2 load only when a site is written

    return build_site([Path(run_dir)], site_dir(run_dir)) / "index.html"


def has_site(run_dir: Path) -> bool:
    return (site_dir(run_dir) / "index.html").exists()
