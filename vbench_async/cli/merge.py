"""`vbench-async merge`: combine the shards of a sharded run into one summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from .include import add_include_option
from .output import print_table, write_run_site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="combine the shard result files of a sharded run (run --shard K/N) into one summary",
        description=(
            "Check the shards that `vbench-async run --shard K/N --output-dir OUTPUT_DIR` wrote and combine them: "
            "every benchmark must have been run under one config hash and one split, and every sample must have "
            "exactly one result across the shards. Then write results/<benchmark>.<hash>.jsonl, summary.json, "
            "manifest.json and the leaderboard, as an unsharded run would. Missing, duplicated or unexpected samples "
            "are listed by id and nothing is written. The last shard to finish merges automatically; this command is "
            "for merging by hand (e.g. after re-running a failed shard)."
        ),
    )
    p.add_argument("output_dir", type=Path, metavar="OUTPUT_DIR", help="the --output-dir every shard wrote into")
    p.add_argument("--config-hash", action="append", metavar="HASH",
                   help="merge only the shards of this config hash (the 12 hex digits in the result file names); "
                        "repeat for several. Default: all, refusing a benchmark with shards of different configs")
    p.add_argument("--no-site", action="store_true", help="do not write the HTML leaderboard into OUTPUT_DIR")
    add_include_option(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..results.merge import merge_run
    from ..results.run_cards import use_run_cards

    if not args.output_dir.is_dir():
        raise UserError(f"{args.output_dir} is not a folder; give the --output-dir the shards wrote into")
    use_run_cards(args.output_dir)  # the shards' own card folders (their manifests)
    summary = merge_run(args.output_dir, set(args.config_hash) if args.config_hash else None)
    merged = summary.merged
    print(f"merged shards {', '.join(merged.shards if merged else ())} of {args.output_dir}\n")
    print_table(summary)
    print(f"\nsummary: {args.output_dir}/summary.json")
    if not args.no_site:
        print(f"leaderboard: {write_run_site(args.output_dir)}")
    failed = summary.n_failed()
    if failed:  # shards under torchrun exit 0 with failed samples (so no sibling is killed): this exit code says it
        print(f"{failed} sample(s) failed; their reasons are in the result files (field 'error').", file=sys.stderr)
    return 1 if failed else 0
