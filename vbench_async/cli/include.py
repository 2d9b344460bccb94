"""The `--include DIR` option of every command that names benchmarks (light: `--help` imports it)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_include_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--include DIR`, on every command that names benchmarks (`cli.main` applies it before the command runs)."""
    parser.add_argument("--include", action="append", type=Path, metavar="DIR",
                        help="a folder of your own benchmark cards (*.yaml) and suites (suites/*.yaml), read and "
                             "checked like the built-in ones; repeat for several. Also $VBENCH_ASYNC_INCLUDE (folders "
                             "separated by ':'). docs/your-benchmarks.md")


def apply_include(args: argparse.Namespace) -> None:
    """Register the folders a command was given with --include (the registry reads $VBENCH_ASYNC_INCLUDE itself)."""
    if getattr(args, "include", None):
        from ..benchmarks.include import add_include

        add_include(*args.include)
