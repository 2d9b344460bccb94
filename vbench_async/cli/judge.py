"""`vbench-async judge`: LLM-as-judge pass over the answers of a run directory that wait for a judge."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from .formatting import DefaultsHelpFormatter
from .output import has_site, print_table, write_run_site
from .include import add_include_option

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
    from ..backends.factory import BACKENDS
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from .console import add_verbose
    from .formatting import bounded
    from .options import add_group

    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="result directory written by `vbench-async run`")
    p.add_argument("--judge-model", required=True,
                   help="judge model: a model directory, hub id or tiny-* model (vllm, hf), or the served model name "
                        "(openai)")
    p.add_argument("--backend", default="vllm", choices=BACKENDS,
                   help="where the judge runs: in-process vLLM, an OpenAI-compatible server, or transformers")
    p.add_argument("--max-tokens", type=bounded(int, min=1), default=None,
                   help="tokens per judge reply (default: each protocol step's own limit; raise it for reasoning "
                        "judges)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (decoding is greedy)")
    p.add_argument("--concurrency", type=bounded(int, min=1), default=8,
                   help="judge requests in flight (also the vLLM engine's sequences at once)")
    p.add_argument("--retry-failed", action="store_true", help="judge again the items whose verdict was unparsable")
    p.add_argument("--no-site", action="store_true", help="do not rebuild RUN_DIR/leaderboard")
    add_group(p, VLLMSettings, exclude=JUDGE_SETS)
    add_group(p, ServerSettings, exclude=JUDGE_SETS)
    add_include_option(p)
    add_verbose(p)


def main(args: argparse.Namespace) -> int:
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..judge import JudgeConfig, judge_run_dir
    from .console import engine_console, engine_log_path
    from .options import from_args

    if args.backend == "openai" and not args.base_url:
        raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    cfg = JudgeConfig(model=args.judge_model, backend=args.backend,
                      engine=from_args(VLLMSettings, args, exclude=JUDGE_SETS, max_num_seqs=max(1, args.concurrency)),
                      server=from_args(ServerSettings, args, exclude=JUDGE_SETS), max_tokens=args.max_tokens,
                      seed=args.seed, concurrency=args.concurrency, retry_failed=args.retry_failed)
    if not args.run_dir.is_dir():
        raise UserError(f"{args.run_dir} is not a result directory; evaluate a model into it first")
    with engine_console(engine_log_path(args.run_dir), verbose=args.verbose,  # the judge engine's logs
                        engine_in_process=args.backend != "openai"):
        summary = judge_run_dir(args.run_dir, cfg)
    jp = summary["judge_pass"]
    print(f"judge {jp['judge_id']}: {jp['n_judged']} judged, {jp['n_judge_failed']} judge failure(s), "
          f"{jp['n_skipped']} already judged")
    print()
    print_table(summary)
    if not args.no_site and has_site(args.run_dir):
        write_run_site(args.run_dir)
    return 0
