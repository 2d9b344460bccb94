"""`vbench-async new-benchmark NAME --from-records FILE`: write a starter card for your own annotation file."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..errors import UserError


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "new-benchmark",
        help="write a starter benchmark card from an annotation file",
        description=(
            "Write OUTPUT/NAME.yaml, a card for the unified-format records in FILE (problem_type, problem, options, "
            "solution, path): task types detected from the records, a prompt template and metric chosen for them, "
            "categories from the extra fields with a few repeated values. Then: `vbench-async data validate FILE "
            "--benchmark NAME --include OUTPUT` and `vbench-async run --include OUTPUT --benchmarks NAME ...`."
        ),
    )
    p.add_argument("name", metavar="NAME", help="the benchmark id (lowercase letters, digits, '-', '_')")
    p.add_argument("--from-records", type=Path, required=True, metavar="FILE",
                   help="annotation file (.json array or .jsonl) in the unified format")
    p.add_argument("--video-dir", type=Path,
                   help="the folder the records' `path` values are relative to (default: FILE's folder)")
    p.add_argument("--data-root", type=Path,
                   help="write the card's paths relative to this data root (default: absolute paths)")
    p.add_argument("-o", "--output", type=Path, default=Path("."), metavar="OUTPUT",
                   help="folder to write NAME.yaml into (created); give it to --include")
    p.add_argument("--force", action="store_true", help="overwrite an existing NAME.yaml")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from ..benchmarks.starter import card_text, starter_card

    card = starter_card(args.name, args.from_records, args.video_dir, args.data_root)
    target = args.output / f"{args.name}.yaml"
    if target.exists() and not args.force:
        raise UserError(f"{target} exists; pass --force to overwrite it")
    try:
        args.output.mkdir(parents=True, exist_ok=True)
        target.write_text(card_text(card, args.from_records), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    types = ", ".join(card["task_types"])
    print(f"wrote {target}: task types {types}; prompt {card['prompt']}; metric {card['metric']}")
    for i, line in enumerate(next_commands(args)):
        print(("next: " if i == 0 else "      ") + line)
    return 0


def next_commands(args: argparse.Namespace) -> list[str]:
    """What to run next, ready to paste: the card's paths are relative to --data-root when one was given, so the
    commands that read the data name it too; the run uses a built-in tiny model (a check of the pipeline)."""
    include = ["--include", str(args.output)]
    root = ["--data-root", str(args.data_root)] if args.data_root else []
    return [shlex.join(["vbench-async", "data", "validate", str(args.from_records), "--benchmarks", args.name,
                        *include]),
            shlex.join(["vbench-async", "data", "check", args.name, *include, *root]),
            shlex.join(["vbench-async", "run", *include, "--benchmarks", args.name, *root, "--model",
                        "tiny-qwen2.5-vl"]) + "   # then --model YOUR_MODEL"]
