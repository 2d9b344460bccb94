"""`vbench-async` command line: one module per subcommand, each exposing `register(subparsers)`.

Subcommand modules only parse arguments and print; the work lives in the library modules they call.
Heavy imports (torch, vllm) happen inside the command functions so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from ..errors import UserError
from ..process_exit import INTERRUPTED, exit_now

# Order here is the order in `vbench-async --help`.
_COMMAND_MODULES = [
    "run",
    "plan",
    "merge",
    "preprocess",
    "cache",
    "list",
    "data",
    "judge",
    "leaderboard",
    "compare",
    "train",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vbench-async",
        description=(
            "Evaluate video-language models on video benchmarks with vLLM's async engine, from a "
            "content-addressed frame cache; publish static HTML leaderboards; train with RL on the same data."
        ),
        epilog="Run `vbench-async COMMAND --help` for the options of each command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages (engine logs included)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"vbench-async: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vbench-async: interrupted", file=sys.stderr)
        return INTERRUPTED


def entry() -> None:
    """The console script."""
    exit_now(main())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    entry()
