"""`vbench-async plan`: what a run will need, before it starts: frames, tokens, context, KV and frame cache."""

from __future__ import annotations

import argparse
import json

from . import run_options
from .formatting import DefaultsHelpFormatter
from .plan_view import print_plan


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plan",
        help="show the frames, tokens, context and cache a run needs, and whether it fits (no engine)",
        description=(
            "Plan `vbench-async run` with the same options: per benchmark, the frames per video, the visual and "
            "whole-prompt tokens per sample (the model's own chat template, tokenizer and placeholder rules), the "
            "largest context, the KV cache per sequence and at --concurrency, the frame-cache bytes still to write "
            "(and the free disk), and whether it fits the engine's context and the model's max_position_embeddings. "
            "Video headers are probed in parallel and kept under the frame cache; no frame is decoded and no engine "
            "starts."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """Exactly the options of the run it plans."""
    run_options.add_run_options(p)


def main(args: argparse.Namespace) -> int:
    from ..evaluation.runner import plan

    workload = plan(run_options.config_from_args(args))
    if args.json:
        print(json.dumps(workload.to_dict(), indent=1))
    else:
        print_plan(workload)
    return 0 if workload.fits and not workload.not_run else 1
