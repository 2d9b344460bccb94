"""`vbench-async plan`: what a run will need, before it starts: frames, tokens, context, KV and frame cache."""

from __future__ import annotations

import argparse
import dataclasses
import json

from . import run_options
from .formatting import DefaultsHelpFormatter
from .plan_view import print_plan, print_recipe_comparison, recipe_rows

NO_RECIPE = "none"  # in --compare-recipes: the cards and flags alone


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "plan",
        help="show the frames, tokens, context and cache a run needs, and whether it fits (no engine)",
        description=(
            "Plan `vbench-async run` with the same options: per benchmark, the frames per video, the visual and "
            "whole-prompt tokens per sample (the model's own chat template, tokenizer and placeholder rules), the "
            "largest context, the KV cache per sequence and at --concurrency, the frame-cache bytes still to write "
            "(and the free disk), and whether it fits the engine's context and the model's max_position_embeddings. "
            "Video headers are probed in parallel and kept under the frame cache; no frame is decoded and no engine "
            "starts. With --compare-recipes, the same selection under each recipe, one row per recipe and benchmark."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--compare-recipes", metavar="NAME,NAME", type=_recipe_names, default=None,
        help="plan the selection under each of these recipes (`list --recipes`; 'none': the cards and flags alone) "
             "and print one row per recipe and benchmark: frames per video, visual and prompt tokens, the answer's "
             "max tokens, the largest context and its KV cache per sequence and at --concurrency, so what each "
             "recipe costs shows before a run; the other flags apply to every recipe, as `run` would take them "
             "(not with --recipe)")
    p.set_defaults(func=main)
    return p


def _recipe_names(text: str) -> tuple[str | None, ...]:
    from ..benchmarks.recipes import RECIPES

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n != NO_RECIPE and n not in RECIPES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown recipe(s) {', '.join(unknown) or '(none given)'}; choose from "
                                         f"{', '.join((NO_RECIPE, *RECIPES))}")
    return tuple(dict.fromkeys(None if n == NO_RECIPE else n for n in names))  # in order, once each


def add_options(p: argparse.ArgumentParser) -> None:
    """Exactly the options of the run it plans."""
    run_options.add_run_options(p)


def main(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..evaluation.runner import plan

    cfg = run_options.config_from_args(args)
    if args.compare_recipes is not None:
        if cfg.recipe is not None:
            raise UserError("give --recipe or --compare-recipes, not both")
        plans = {name or NO_RECIPE: plan(dataclasses.replace(cfg, recipe=name)) for name in args.compare_recipes}
        if args.json:
            print(json.dumps({"rows": [dataclasses.asdict(r) for r in recipe_rows(plans)],
                              "recipes": {name: w.to_dict() for name, w in plans.items()}}, indent=1))
        else:
            print_recipe_comparison(plans)
        return 0 if all(w.fits and not w.not_run for w in plans.values()) else 1
    workload = plan(cfg)
    if args.json:
        print(json.dumps(workload.to_dict(), indent=1))
    else:
        print_plan(workload)
    return 0 if workload.fits and not workload.not_run else 1
