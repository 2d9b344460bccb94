"""`vbench-async judge`: LLM-as-judge pass over the answers of a run directory that wait for a judge."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..process_exit import sigterm_as_ctrl_c
from ..results.rundir import has_site
from .formatting import DefaultsHelpFormatter
from .include import add_include_option
from .judge_report import judge_pass_line, report_judge_failures
from .output import print_table, write_run_site

# Settings the judge decides itself: its engine runs --concurrency sequences; the server's name for the evaluated
# model is not the judge's.
JUDGE_SETS = ("max_num_seqs", "served_model")


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "judge",
        help="LLM-as-judge pass over the answers of a run that wait for a judge",
        description=(
            "Judge the answers of RUN_DIR that wait for a judge (free text scored offline by ROUGE-L, and items whose "
            "official protocol hands them to a judge) with a judge model, by each benchmark's own protocol: "
            "VideoReasonBench (its judge prompt on the text after 'Final Answer'; its state simulator for items "
            "without a fixed answer), VCR-Bench (extraction, then matching), Video-MMLU (the judge answers the "
            "video's questions from the caption), MMVU open-ended (rules, then the judge), TempCompass (rules, then "
            "the judge; captioning answered from the caption); the generic CORRECT/INCORRECT prompt otherwise. "
            "Verdicts are appended to RUN_DIR/judge/*.jsonl, pinned by judge model fingerprint and prompt hash; "
            "re-running skips items already judged by the same judge. An unparsable reply is recorded as a judge "
            "failure (the item keeps its offline score). summary.json is then recomputed."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..evaluation.judge_pass import JudgeConfig
    from .console import add_verbose
    from .options import add_fields, add_group

    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="result directory written by `vbench-async run`")
    add_fields(p, JudgeConfig)
    p.add_argument("--no-site", action="store_true", help="do not rebuild RUN_DIR/leaderboard")
    add_group(p, VLLMSettings, exclude=JUDGE_SETS)
    add_group(p, ServerSettings, exclude=JUDGE_SETS)
    add_include_option(p)
    add_verbose(p)


def main(args: argparse.Namespace) -> int:
    from ..backends.factory import backend_kind
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..evaluation.judge_pass import JudgeConfig, judge_run_dir
    from ..results.run_cards import use_run_cards
    from .console import engine_console, engine_log_path
    from .options import from_args

    cfg = from_args(JudgeConfig, args,
                    engine=from_args(VLLMSettings, args, exclude=JUDGE_SETS, max_num_seqs=max(1, args.concurrency)),
                    server=from_args(ServerSettings, args, exclude=JUDGE_SETS))
    kind = backend_kind(cfg.backend)
    kind.check(cfg.server)
    if not args.run_dir.is_dir():
        raise UserError(f"{args.run_dir} is not a result directory; evaluate a model into it first")
    use_run_cards(args.run_dir)  # before any engine starts: the run's own card folders, from its manifest
    sigterm_as_ctrl_c()  # a long pass: a scheduler's SIGTERM closes the judge engine and keeps the verdicts, as Ctrl-C
    try:
        with engine_console(engine_log_path(args.run_dir), verbose=args.verbose,  # the judge engine's logs
                            engine_in_process=kind.in_process):
            judged = judge_run_dir(args.run_dir, cfg, kind)
    except KeyboardInterrupt:
        print(f"verdicts so far are kept in {args.run_dir / 'judge'}; re-run the same command to judge the rest",
              file=sys.stderr)
        raise
    print(judge_pass_line(judged.judge_pass, args.run_dir))
    print()
    print_table(judged.summary)
    code = report_judge_failures(judged.judge_pass, args.run_dir)
    if not args.no_site and has_site(args.run_dir):
        write_run_site(args.run_dir)
    return code
