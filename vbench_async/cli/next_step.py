"""Messages that name the next step: what to type after a mistake the library reported in its own terms, and a
one-line "did you mean" for the flags of lmms-eval and VLMEvalKit that people bring with them."""

from __future__ import annotations

import argparse
import shlex
from typing import Any, Mapping, Sequence

from ..errors import NoData
from ..results.summary_record import Summary
from ..sample_result import FramesSeen, Result

# Flags of lmms-eval / VLMEvalKit (and their spellings with '-') -> this project's flag.
ECOSYSTEM_FLAGS: dict[str, str] = {
    "--tasks": "--benchmarks ID,ID (or --suite NAME; `vbench-async list` shows both)",
    "--limit": "--max-samples N",
    "--output_path": "--output-dir DIR",
    "--output-path": "--output-dir DIR",
    "--work-dir": "--output-dir DIR",
    "--batch_size": "--concurrency N (requests in flight)",
    "--batch-size": "--concurrency N (requests in flight)",
    "--model_args": "--model DIR_OR_HUB_ID with the engine's own flags (--max-model-len, --dtype, "
                    "--tensor-parallel-size, ...; see `vbench-async run --help`)",
    "--model-args": "--model DIR_OR_HUB_ID with the engine's own flags (--max-model-len, --dtype, "
                    "--tensor-parallel-size, ...; see `vbench-async run --help`)",
    "--log_samples": "nothing: every sample is always written to OUTPUT_DIR/results/*.jsonl",
}


def ecosystem_hints(command_parser: argparse.ArgumentParser | None, words: Sequence[str]) -> list[str]:
    """One "did you mean" line per flag in `words` that another toolkit uses and this command does not know."""
    known = set(getattr(command_parser, "_option_string_actions", {}) or {})
    out = []
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in ECOSYSTEM_FLAGS and flag not in known:
            out.append(f"vbench-async: error: unrecognized argument {flag}; did you mean {ECOSYSTEM_FLAGS[flag]}?")
    return out


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser | None:
    """The sub-parser of `command` (None when there is no such command)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action.choices.get(command)
    return None


def selection_flags(args: argparse.Namespace) -> str:
    """The selection as flags, to repeat in a suggested command: `--suite all`, `--benchmarks a,b`."""
    parts = []
    if getattr(args, "suite", None):
        parts += ["--suite", str(args.suite)]
    benchmarks = getattr(args, "benchmarks", None)
    if isinstance(benchmarks, str) and benchmarks:
        parts += ["--benchmarks", benchmarks]
    elif isinstance(benchmarks, (list, tuple)) and benchmarks:
        parts += ["--benchmarks", ",".join(map(str, benchmarks))]
    return shlex.join(parts)


def no_data_message(exc: NoData, args: argparse.Namespace) -> str:
    """The library's "no data under ROOT" with where the data root comes from and the command that lists what is
    missing."""
    given = getattr(args, "data_root", None)
    check = f"vbench-async data check {selection_flags(args)} --data-root {shlex.quote(str(given)) if given else 'DIR'}"
    return (f"{exc}. The data root is --data-root DIR, else $VBENCH_DATA_ROOT, else ./data; give the folder that "
            f"holds the benchmarks' annotation files and videos (benchmarks/*.yaml name the layout). To see what "
            f"each benchmark needs: {' '.join(check.split())}")


def _frames_seen(line: dict[str, Any]) -> FramesSeen | None:
    return Result.read(line).frames_seen()


def budget_warnings(budgets: Sequence[int], summaries: Sequence[Summary | Mapping[str, Any]]) -> list[str]:
    """For a frame-budget sweep: the budgets that gave some videos no more frames than the budget below (the videos
    are too short for it at the sampling rate), so those samples were evaluated twice on the same frames.
    `summaries`: each budget's, with its `run_dir`."""
    from pathlib import Path

    from ..results.lines import read_lines

    def frames_by_sample(summary: Summary) -> dict[str, int]:
        out: dict[str, int] = {}
        for bid, block in summary.benchmarks.items():
            path = Path(str(summary.run_dir)) / str(block.results_file or "")
            if not block.results_file or not path.is_file():
                continue
            # the result lines' frame records (a line of a damaged record has none)
            for sid, frames in read_lines(path, view=_frames_seen).items():
                if frames is not None:
                    out[f"{bid}/{sid}"] = frames.n
        return out

    seen = [frames_by_sample(Summary.of(s)) for s in summaries]
    out = []
    for i in range(1, len(seen)):
        common = set(seen[i]) & set(seen[i - 1])
        same = [k for k in common if seen[i][k] == seen[i - 1][k]]
        if same:
            out.append(f"max_frames={budgets[i]}: {len(same)} of {len(common)} sample(s) got the same frames as "
                       f"max_frames={budgets[i - 1]} (their videos are too short for more at the sampling rate): "
                       "for them the two runs are one, and the budget chart's step says nothing")
    return out
