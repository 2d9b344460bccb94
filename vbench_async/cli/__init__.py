"""`vbench-async` command line: one module per subcommand, each exposing `register(subparsers)`.

Subcommand modules only parse arguments and print; the work lives in the library modules they call. `main` turns
the library's errors into exit codes, once for every command. Heavy imports (torch, vllm) happen inside the command
functions so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import EngineDead, NoData, UserError
from ..phases import mark
from ..process_exit import INTERRUPTED, exit_now
from ..redact import remember_named
from . import next_step
from .console import configure_logging
from .include import apply_include

USAGE_ERROR = 2  # a mistake in the user's input
ENGINE_DEAD = 3  # the engine or server went away; finished work is kept

# Order here is the order in `vbench-async --help`.
_COMMAND_MODULES = [
    "run",
    "plan",
    "merge",
    "preprocess",
    "cache",
    "list",
    "data",
    "new_benchmark",
    "judge",
    "leaderboard",
    "compare",
    "train",
    "serve",
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser. A command module with an `add_options(parser)` gets its options from it: for every
    command when `command` is None, else only for that one (`main` builds only the command it runs, so `--help` and
    light commands do not load the settings of heavy ones)."""
    parser = argparse.ArgumentParser(
        prog="vbench-async",
        description=(
            "Evaluate video-language models on video benchmarks with vLLM's async engine, from a "
            "content-addressed frame cache; publish static HTML leaderboards; train with RL on the same data."
        ),
        epilog="Run `vbench-async COMMAND --help` for the options of each command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show debug messages and the engine's logs live (they always go to "
                             "OUTPUT_DIR/logs/engine.log)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        command_parser = module.register(sub)
        if hasattr(module, "add_options") and command in (None, name):
            module.add_options(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), "")  # only -v/-h come before the command
    parser = build_parser(command)
    hints = next_step.ecosystem_hints(next_step.command_parser(parser, command), words)
    if hints:  # another toolkit's flag: one line naming ours, not the whole usage
        print("\n".join(hints), file=sys.stderr)
        return USAGE_ERROR
    args = parser.parse_args(argv)
    remember_named(vars(args))  # a secret flag's value is redacted wherever this command writes it
    mark("parsed")
    configure_logging(args.verbose)
    try:
        apply_include(args)
        return int(args.func(args) or 0)
    except NoData as exc:
        print(f"vbench-async: error: {next_step.no_data_message(exc, args)}", file=sys.stderr)
        return USAGE_ERROR
    except UserError as exc:
        print(f"vbench-async: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except EngineDead as exc:
        print(f"vbench-async: the engine stopped: {exc}\nFinished results are kept; re-run the same command to "
              "resume.", file=sys.stderr)
        return ENGINE_DEAD
    except KeyboardInterrupt:
        print("vbench-async: interrupted", file=sys.stderr)
        return INTERRUPTED


def entry() -> None:
    """The console script."""
    code = main()
    mark("returned")
    exit_now(code)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    entry()
