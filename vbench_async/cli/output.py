"""What the commands print and publish after the library has done the work: the score table and a run's own site."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, TextIO

from ..results.rundir import site_dir, site_log_path
from ..results.summaries import benchmark_status
from ..results.summary_record import BenchmarkSummary, Summary


def print_rows(rows: list[tuple[str, ...]], left: tuple[int, ...] = (0,), file: TextIO | None = None) -> None:
    """A plain-text table: the first row is the header; columns in `left` are left-aligned, the others right."""
    file = file or sys.stdout  # looked up per call: tests (and callers) may have replaced sys.stdout
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j in left else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))),
              file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


_STATUS_LABELS = {"complete": "complete", "subset": "SUBSET", "failed": "ALL FAILED", "partial": "PARTIAL"}


def pct(x: Any) -> str:
    return f"{100 * x:.2f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "-"


def _interval(block: BenchmarkSummary) -> str:
    ci = block.interval
    return f"[{pct(ci.low)}, {pct(ci.high)}]" if ci is not None and ci.to_json() else "-"


def _chance(block: BenchmarkSummary) -> str:
    """The chance column: a uniform guess's score among the options; "~0" for free-form answers."""
    return pct(block.chance) if block.chance is not None else "~0" if block.chance_recorded else "-"


def chance_notes(summary: Summary | Mapping[str, Any]) -> list[str]:
    """What the chance column means, and why a random-weight model scores what it does."""
    summary = Summary.of(summary)
    if not any(b.chance_recorded for b in summary.benchmarks.values()):
        return []  # a summary from before chance was recorded
    out = ["chance: the score of guessing uniformly among a question's options (1/options; yes/no 50); ~0 where "
           "the answer is free-form (a number, text, a time span, a box), which a guess almost never matches"]
    if summary.random_weights:
        out.append(f"{summary.model} has random weights: its outputs are noise that seldom contain a valid "
                   "answer, so scores near 0 (below chance even on choice questions) are expected, not a scorer "
                   "fault; a trained checkpoint (`vbench-async run --model DIR`) is what can score above chance")
    return out


def reading_note(summary: Summary | Mapping[str, Any]) -> str:
    """What the score column is, as each block's `reading` says: the official protocol's reading, or, for a
    benchmark without official scoring code ("reading": "robust"), the careful grader's."""
    summary = Summary.of(summary)
    robust = [bid for bid, b in summary.benchmarks.items() if b.reading == "robust"]
    if robust and len(robust) == len(summary.benchmarks):
        return ('score: the careful grader\'s reading (summary.json\'s "reading": "robust": no official scoring code '
                "to follow), so robust repeats it")
    tail = "robust: the careful grader's; differ: samples the two score differently"
    if robust:
        return (f"score: the official protocol's reading (comparable with papers), except {', '.join(robust)}: no "
                f'official scoring code, so the careful grader\'s ("reading": "robust"); {tail}')
    return f"score: the official protocol's reading (comparable with papers); {tail}"


def print_table(summary: Summary | Mapping[str, Any], file: TextIO | None = None) -> None:
    """The score table of a summary: one row per benchmark, the official headline with its metric and 95% interval,
    the robust score and the number of samples the two readings disagree on beside it; notes below for subsets and
    for headlines that are not the official aggregation."""
    summary = Summary.of(summary)
    rows: list[tuple[str, ...]] = [
        ("benchmark", "metric", "score", "95% CI", "chance", "robust", "differ", "n_total", "failed", "status")]
    notes = []
    for bid, b in summary.benchmarks.items():
        rows.append(_row(bid, b))
        notes += _block_notes(bid, b)
    for bid in summary.not_run:
        rows.append((bid, "-", "-", "-", "-", "-", "-", "0", "0", "NOT RUN (no data)"))
    print_rows(rows, left=(0, 1, 9), file=file)
    notes[:0] = chance_notes(summary)
    if any(len(r) and r[5] != "-" for r in rows[1:]):
        notes.insert(0, reading_note(summary))
    for note in notes:
        print(f"  {note}", file=file or sys.stdout)


def _row(bid: str, b: BenchmarkSummary) -> tuple[str, ...]:
    status = b.status or benchmark_status(b)
    failed = status == "failed"
    robust = b.robust
    return (
        bid,
        str(b.metric or "").split(";")[0].strip() or "-",
        "-" if failed else b.headline_status if b.headline_status else pct(b.score),
        "-" if failed else _interval(b),
        _chance(b),
        "-" if failed or robust is None or not robust.to_json() else pct(robust.score),
        str(b.n_readings_differ) if b.has("n_readings_differ") else "-",
        str(b.n_total),
        str(b.n_failed),
        _STATUS_LABELS.get(status, "PARTIAL"),
    )


def _block_notes(bid: str, b: BenchmarkSummary) -> list[str]:
    """The notes under the table for one benchmark: a subset, a headline that is not the official one, breakdowns
    the records cannot give, the official code's per-group report and a second number reported beside the score."""
    notes = []
    if b.subset is not None and b.subset.to_json():
        notes.append(f"{bid}: a subset, {b.subset.reason if b.subset.has('reason') else 'part of the benchmark'}")
    basis = b.headline_basis
    if basis is not None and basis.to_json():
        notes.append(f"{bid}: {basis.reported} reported instead of {basis.official}: {basis.reason}")
    for name, reason in b.unavailable_breakdowns.items():
        notes.append(f"{bid}: no per-{name} breakdown: {reason}")
    for per, groups in b.official_groups().items():  # Video-MMMU tracks, TempCompass formats
        notes.append(f"{bid}: official per {per}: " + ", ".join(
            f"{k} {pct(g.score) if g.score is not None else 'needs judge'}" for k, g in groups.items()))
    for name, other in b.also_reported.items():  # a second number, labelled
        notes.append(f"{bid}: also {name} = {pct(other.score)} ({other.definition})")
    return notes


def write_run_site(run_dir: Path) -> Path:
    """(Re)build the run directory's own leaderboard; returns its index.html."""
    from ..leaderboard import build_site  # pandas and jinja2 load only when a site is written

    return build_site([Path(run_dir)], site_dir(run_dir)) / "index.html"


def write_run_site_in_background(run_dir: Path) -> Path:
    """Start (re)building the run directory's own leaderboard in a process of its own and return its index.html at
    once: a user waits for the table and the exit code, not for pages and frame strips."""
    return build_site_in_background([run_dir], site_dir(run_dir), site_log_path(run_dir)) / "index.html"


def write_run_site_and_wait(run_dir: Path) -> Path:
    """As `write_run_site_in_background`, but return once its process has ended: a server writes its jobs' sites one
    at a time (thirty finished jobs must not start thirty builds at once)."""
    _start_build([run_dir], site_dir(run_dir), site_log_path(run_dir)).wait()
    return site_dir(run_dir) / "index.html"


def build_site_in_background(run_dirs: list[Path], out_dir: Path, log_path: Path) -> Path:
    """`vbench-async leaderboard RUN_DIR... -o OUT_DIR` in a detached process (it need not outlive the command that
    starts it); returns `out_dir` at once. Its output goes to `log_path`, whose last line is `leaderboard of ...`
    once the site is written."""
    _start_build(run_dirs, out_dir, log_path)
    return out_dir


def _start_build(run_dirs: list[Path], out_dir: Path, log_path: Path) -> subprocess.Popen:
    from ..benchmarks.include import include_dirs

    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "vbench_async", "leaderboard", *map(str, run_dirs), "-o", str(out_dir)]
    for folder in include_dirs():  # the run's own cards name its benchmarks on the pages
        command += ["--include", str(folder)]
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
