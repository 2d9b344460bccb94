"""The end of `run` when samples failed: how many of each kind, and what to do about each."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

_DATA = "check the data: `vbench-async data check --suite ...` lists missing or unreadable files"
_RECORD = "fix the annotation records: `vbench-async data validate FILE`"
_AGAIN = "transient: re-run the same command (such samples are evaluated again)"
# Error kind -> the suggested fix printed next to its count.
FIXES: dict[str, str] = {
    "video_missing": "the video is not where the record says: check --data-root or the data map (README, 'Data "
                     "maps'); " + _DATA.split(": ", 1)[1],
    "image_error": _DATA,
    "video_empty": _DATA,
    "no_video_stream": _DATA,
    "decode_error": _DATA,
    "record_invalid": _RECORD,
    "window_invalid": _RECORD,
    "aspect_ratio": _RECORD,
    "task_type_mismatch": _RECORD,
    "path_unsafe": "a record points outside --data-root: fix it, or pass --allow-outside-root if that is intended",
    "context_overflow": "the prompt does not fit the engine's context: lower --max-frames (or --max-pixels), or "
                        "raise --max-model-len",
    "engine_error": "the engine rejected the request: the message is in the result line's 'error' field and the "
                    "engine's own in OUTPUT_DIR/logs/engine.log",
    "server_error": "the server rejected the request: check --served-model and the server's log",
    "server_unavailable": "the server did not answer: check --base-url and that it is up; " + _AGAIN,
    "decode_timeout": _AGAIN,
    "decoder_crash": _AGAIN,
    "worker_error": _AGAIN,
    "frame_error": _AGAIN,
    "cache_contended": _AGAIN,
}
_OTHER = "see the result lines' 'error' field"


def failure_kinds(run_dir: Path, summary: dict[str, Any]) -> Counter[str]:
    """Failed samples by error kind, over the result files of the benchmarks that have failures."""
    from ..results.store import error_kinds

    kinds: Counter[str] = Counter()
    for b in summary["benchmarks"].values():
        if not b.get("n_failed") or not b.get("results_file"):
            continue
        kinds.update(error_kinds(Path(run_dir) / b["results_file"]))
    return kinds


def print_failures(run_dir: Path, summary: dict[str, Any], file: TextIO | None = None) -> int:
    """Say how many samples failed, by kind, each with its fix; returns the number failed (from the summary)."""
    file = file or sys.stderr
    failed = sum(b.get("n_failed", 0) for b in summary["benchmarks"].values())
    if not failed:
        return 0
    kinds = failure_kinds(run_dir, summary)
    print(f"{failed} sample(s) failed:", file=file)
    for kind, n in kinds.most_common():
        print(f"  {n} {kind}: {FIXES.get(kind, _OTHER)}", file=file)
    if not kinds:
        print(f"  {_OTHER} (in {Path(run_dir) / 'results'})", file=file)
    return failed
