"""What the commands print and publish after the library has done the work: the score table and a run's own site."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from ..results.rundir import site_dir, site_log_path
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


_STATUS_LABELS = {"complete": "complete", "subset": "SUBSET", "failed": "ALL FAILED", "partial": "PARTIAL"}


def pct(x: Any) -> str:
    return f"{100 * x:.2f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "-"


def _interval(block: dict[str, Any]) -> str:
    ci = block.get("interval") or {}
    return f"[{pct(ci.get('low'))}, {pct(ci.get('high'))}]" if ci else "-"


def _chance(block: dict[str, Any]) -> str:
    """The chance column: a uniform guess's score among the options; "~0" for free-form answers."""
    return pct(block["chance"]) if block.get("chance") is not None else "~0" if "chance" in block else "-"


def chance_notes(summary: dict[str, Any]) -> list[str]:
    """What the chance column means, and why a random-weight model scores what it does."""
    if not any("chance" in b for b in summary["benchmarks"].values()):
        return []  # a summary from before chance was recorded
    out = ["chance: the score of guessing uniformly among a question's options (1/options; yes/no 50); ~0 where "
           "the answer is free-form (a number, text, a time span, a box), which a guess almost never matches"]
    if summary.get("random_weights"):
        out.append(f"{summary.get('model')} has random weights: its outputs are noise that seldom contain a valid "
                   "answer, so scores near 0 (below chance even on choice questions) are expected, not a scorer "
                   "fault; a trained checkpoint (`vbench-async run --model DIR`) is what can score above chance")
    return out


def reading_note(summary: dict[str, Any]) -> str:
    """What the score column is, as each block's `reading` says: the official protocol's reading, or, for a
    benchmark without official scoring code ("reading": "robust"), the careful grader's."""
    robust = [bid for bid, b in summary["benchmarks"].items() if b.get("reading") == "robust"]
    if robust and len(robust) == len(summary["benchmarks"]):
        return ('score: the careful grader\'s reading (summary.json\'s "reading": "robust": no official scoring code '
                "to follow), so robust repeats it")
    tail = "robust: the careful grader's; differ: samples the two score differently"
    if robust:
        return (f"score: the official protocol's reading (comparable with papers), except {', '.join(robust)}: no "
                f'official scoring code, so the careful grader\'s ("reading": "robust"); {tail}')
    return f"score: the official protocol's reading (comparable with papers); {tail}"


def print_table(summary: dict[str, Any], file: TextIO | None = None) -> None:
    """The score table of a summary: one row per benchmark, the official headline with its metric and 95% interval,
    the robust score and the number of samples the two readings disagree on beside it; notes below for subsets and
    for headlines that are not the official aggregation."""
    rows = [("benchmark", "metric", "score", "95% CI", "chance", "robust", "differ", "n_total", "failed", "status")]
    notes = []
    for bid, b in summary["benchmarks"].items():
        status = b.get("status") or benchmark_status(b)
        failed = status == "failed"
        robust = b.get("robust") or {}
        rows.append((
            bid,
            str(b.get("metric") or "").split(";")[0].strip() or "-",
            "-" if failed else b.get("headline_status") if b.get("headline_status") else pct(b.get("score")),
            "-" if failed else _interval(b),
            _chance(b),
            "-" if failed or not robust else pct(robust.get("score")),
            str(b["n_readings_differ"]) if "n_readings_differ" in b else "-",
            str(b.get("n_total", 0)),
            str(b.get("n_failed", 0)),
            _STATUS_LABELS.get(status, "PARTIAL"),
        ))
        if b.get("subset"):
            notes.append(f"{bid}: a subset, {b['subset'].get('reason', 'part of the benchmark')}")
        basis = b.get("headline_basis")
        if basis:
            notes.append(f"{bid}: {basis.get('reported')} reported instead of {basis.get('official')}: "
                         f"{basis.get('reason')}")
        for name, reason in (b.get("unavailable_breakdowns") or {}).items():
            notes.append(f"{bid}: no per-{name} breakdown: {reason}")
        for key, groups in b.items():  # the official code's per-group report (Video-MMMU tracks, TempCompass formats)
            if key.startswith("official_by_") and isinstance(groups, dict):
                notes.append(f"{bid}: official per {key[len('official_by_'):]}: " + ", ".join(
                    f"{k} {pct(g.get('score')) if g.get('score') is not None else 'needs judge'}"
                    for k, g in groups.items()))
        for name, other in (b.get("also_reported") or {}).items():  # a second number, labelled
            notes.append(f"{bid}: also {name} = {pct(other.get('score'))} ({other.get('definition')})")
    for bid in summary.get("not_run") or {}:
        rows.append((bid, "-", "-", "-", "-", "-", "-", "0", "0", "NOT RUN (no data)"))
    print_rows(rows, left=(0, 1, 9), file=file)
    notes[:0] = chance_notes(summary)
    if any(len(r) and r[5] != "-" for r in rows[1:]):
        notes.insert(0, reading_note(summary))
    for note in notes:
        print(f"  {note}", file=file or sys.stdout)


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
