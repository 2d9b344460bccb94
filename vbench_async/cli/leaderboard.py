"""`vbench-async leaderboard`: a static HTML site from result directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..results.rundir import summary_path
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
                   help="result directory (holds summary.json); a folder of result directories, such as runs/, "
                        "stands for all of them")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="SITE_DIR",
                   help="folder for the site (created; must be empty or an earlier site)")
    add_include_option(p)
    p.add_argument("--cache-dir", type=Path, action="append", metavar="DIR",
                   help="frame cache to draw the sample browser's frame strips from (repeatable); the runs' own "
                        "caches and the default one are looked in too, then the video files")
    p.add_argument("--no-frames", action="store_true", help="no frame strips (a smaller site)")
    p.set_defaults(func=main)


def expand_run_dirs(paths: list[Path]) -> list[Path]:
    """Each path itself if it holds summary.json, else its sub-folders that do (sorted); UserError if neither."""
    out: list[Path] = []
    for path in paths:
        if summary_path(path).is_file():
            out.append(path)
            continue
        children = sorted(c for c in path.iterdir() if summary_path(c).is_file()) if path.is_dir() else []
        if not children:
            raise UserError(f"{path} is not a result directory (no summary.json) and holds none; "
                            "give folders written by `vbench-async run --output-dir`")
        out.extend(children)
    return list(dict.fromkeys(out))


def main(args: argparse.Namespace) -> int:
    from ..leaderboard import build_site
    from ..results.run_cards import use_run_cards

    run_dirs = expand_run_dirs(args.run_dirs)
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
