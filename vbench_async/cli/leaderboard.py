"""`vbench-async leaderboard`: a static HTML site from result directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..results.rundir import read_summary, summary_path
from .include import add_include_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="write a static HTML leaderboard from result directories",
        description=(
            "Write a static site from one or more result directories (each written by `vbench-async run`): a sortable "
            "models x benchmarks table with 95% confidence intervals and suite averages, a page per benchmark with "
            "category breakdowns, paired comparisons and charts, a per-sample browser with the frames each model "
            "received, side-by-side pages of two runs (the samples that flipped), each run's manifest, and CSV "
            "and JSON exports of every table. It needs no server: open SITE_DIR/index.html from disk. Partial runs, "
            "failed samples and runs made with different settings are marked, never mixed silently."
        ),
    )
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="result directory (holds summary.json); a folder holding result directories, up to "
                        f"{DEPTH} levels down (runs/, runs/demo-rl/), stands for all of them; a folder or file "
                        "holding none (a glob's cache or site folder) is skipped with a note")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="SITE_DIR",
                   help="folder for the site (created; must be empty or an earlier site)")
    add_include_option(p)
    p.add_argument("--cache-dir", type=Path, action="append", metavar="DIR",
                   help="frame cache to draw the sample browser's frame strips from (repeatable); the runs' own "
                        "caches and the default one are looked in too, then the video files")
    p.add_argument("--no-frames", action="store_true", help="no frame strips (a smaller site)")
    p.set_defaults(func=main)


DEPTH = 3  # folder levels below a given folder searched for runs (runs/ -> demo-rl/ -> runs/ -> untrained/)


def find_runs(path: Path, depth: int = DEPTH) -> list[Path]:
    """`path` itself if it holds summary.json, else the result directories below it (sorted, up to `depth` levels
    down; a run's own folder, a site and hidden folders are not searched further, nor links to folders)."""
    from ..leaderboard.site import MARKER  # a site folder (the leaderboard about to be written, too)

    if summary_path(path).is_file():
        return [path]
    if depth <= 0 or not path.is_dir() or (path / MARKER).exists():
        return []
    try:
        children = sorted(c for c in path.iterdir() if not c.name.startswith(".") and c.is_dir())
    except OSError:  # a folder we may not read holds no run we can show
        return []
    out: list[Path] = []
    for child in children:
        if summary_path(child).is_file():
            out.append(child)
        elif not child.is_symlink():
            out.extend(find_runs(child, depth - 1))
    return out


def expand_run_dirs(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(the result directories `paths` stand for, in the order given, each once; the paths that hold none). A path
    that does not exist is a UserError (a typo, or a glob that matched nothing), as is finding no run at all."""
    out: dict[Path, Path] = {}  # resolved -> as given
    skipped: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path} does not exist; give result directories written by `vbench-async run "
                            "--output-dir`, or folders holding them")
        found = find_runs(path)
        if not found:
            skipped.append(path)
        for run in found:
            out.setdefault(run.resolve(), run)
    if not out:
        named = ", ".join(str(p) for p in skipped)
        raise UserError(f"no result directory (a folder with summary.json) in or up to {DEPTH} levels below "
                        f"{named}; give folders written by `vbench-async run --output-dir`")
    return list(out.values()), skipped


def _describe(run_dir: Path) -> str:
    """`runs/demo (tiny-qwen2.5-vl, 6 benchmarks)`: a run as the list of included runs names it."""
    try:
        summary = read_summary(run_dir)
    except UserError:
        return str(run_dir)  # the site build says what is wrong with it
    n = len(summary.benchmarks)
    return f"{run_dir} ({summary.model or '?'}, {n} benchmark{'s' if n != 1 else ''})"


def main(args: argparse.Namespace) -> int:
    from ..leaderboard import build_site
    from ..results.run_cards import use_run_cards

    run_dirs, skipped = expand_run_dirs(args.run_dirs)
    if skipped:
        print(f"note: skipped {len(skipped)} path(s) holding no result directory (no summary.json in or up to "
              f"{DEPTH} levels below): {', '.join(str(p) for p in skipped)}", file=sys.stderr)
    print(f"including {len(run_dirs)} run(s):")
    for run_dir in run_dirs:
        print(f"  {_describe(run_dir)}")
    for run_dir in run_dirs:  # each run's own card folders (its manifest); a card that is gone is said, not hidden
        for problem in use_run_cards(run_dir, strict=False):
            print(f"warning: {problem}", file=sys.stderr)
    try:
        site = build_site(run_dirs, args.output, cache_dirs=args.cache_dir, frames=not args.no_frames)
    except OSError as exc:  # a read-only or full destination: one line, not a traceback
        raise UserError(f"cannot write the site to {args.output}: {exc.strerror or exc}; choose a writable -o "
                        "folder") from exc
    print(f"leaderboard of {len(run_dirs)} run(s): {site / 'index.html'}")
    return 0
