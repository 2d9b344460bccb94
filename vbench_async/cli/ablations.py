"""`run --ablation none,blank,...`: the same evaluation with each input ablation, on one engine, side by side.

`none` is the real frames, written to OUTPUT_DIR as a plain run would be; each ablation is a run of its own in
OUTPUT_DIR/ablation-KIND. The last table puts their headlines next to each other with the chance level: a model
that sees scores above chance with the frames and at chance without them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..process_exit import sigterm_as_ctrl_c
from ..results.summary_record import Summary
from .output import pct, print_table, write_run_site_in_background

if TYPE_CHECKING:
    from ..evaluation.run_config import RunConfig


def ablation_dir(base: Path, kind: str | None) -> Path:
    return base if kind is None else base / f"ablation-{kind}"


def side_by_side(kinds: list[str | None], summaries: Sequence[Summary | Mapping[str, Any]]) -> list[str]:
    """Lines of one table: a row per benchmark, its chance level and its headline under each input."""
    heads = ["benchmark", "chance", *("frames" if k is None else k for k in kinds)]
    rows = [heads]
    read = [Summary.of(s) for s in summaries]
    for bid, first in read[0].benchmarks.items():
        cells = [bid, "~0" if first.chance is None else pct(first.chance)]
        for s in read:
            block = s.benchmarks.get(bid)
            cells.append(pct(block.score if block is not None else None))
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in rows]


def ablations_main(args: argparse.Namespace, cfg: RunConfig) -> int:
    from ..evaluation.run_config import resolve_run
    from ..evaluation.sweep import run_on_one_engine
    from .console import engine_console, engine_log_path
    from .plan_view import print_plan_lines

    sigterm_as_ctrl_c()
    kinds: list[str | None] = list(args.ablations)
    resolved = resolve_run(dataclasses.replace(cfg, ablation=None))  # once, here: the model, its kind, runs/<name>
    kind, base = resolved.kind, resolved.run_dir
    cfgs = [dataclasses.replace(cfg, ablation=k, output_dir=ablation_dir(base, k)) for k in kinds]
    def console(run_dir: Path) -> contextlib.AbstractContextManager[Any]:
        return engine_console(engine_log_path(run_dir), verbose=args.verbose, engine_in_process=kind.in_process)

    # run_on_one_engine runs the largest "budget" first: rank each input by its place, so ours keep their order
    rank = [len(kinds) - i for i in range(len(kinds))]

    def on_plan(workload: Any, not_run: dict[str, str], budget: int, first: bool) -> None:
        if first:  # the run that starts the engine: the start line
            print_plan_lines(workload, not_run, engine=kind.describe_target(cfg.server), verbose=args.verbose)
        else:
            k = kinds[rank.index(budget)]
            print_plan_lines(workload, not_run, verbose=args.verbose, then="frames" if k is None else f"ablation {k}")

    summaries = run_on_one_engine(cfgs, rank, on_plan, console, resolved)
    code = 0
    for k, summary in zip(kinds, summaries):
        print(f"\n{'frames' if k is None else 'ablation ' + k}: {summary.run_dir}")
        print_table(summary)
        code = code or (1 if summary.n_failed() or not summary.complete else 0)
    print("\nscores by input (a model that sees falls to chance without its frames):")
    for line in side_by_side(kinds, summaries):
        print(line)
    if None in kinds and not args.no_site:
        print(f"\nleaderboard: {write_run_site_in_background(base)}", file=sys.stdout)
    return code
