"""The third process of the run stress test: `vbench-async cache gc`, `compact` and `verify` over and over.

`python maintain_cache.py CACHE MAX_GB STOP LOG`: until the file STOP exists, runs `cache gc --max-gb MAX_GB`,
`cache compact` (raw and zstd by turns, so every pass rewrites every entry) and `cache verify --delete` through the
CLI's own entry point (`vbench_async.cli.main`, what the `vbench-async` command calls), in one process so a pass
takes milliseconds rather than an interpreter start each. Each command's exit code and output is a JSON line of LOG;
an exception out of a command is logged as exit code -1 with its traceback (the test fails on it).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vbench_async.cli import main as cli  # noqa: E402 - after the path, so the worktree's package is the one used


def loop(cache: Path, max_gb: str, stop: Path, log: Path) -> None:
    i = 0
    with open(log, "a") as out:
        while not stop.exists():
            if not cache.is_dir():  # the runs have not made it yet: the commands would only say "no frame cache"
                time.sleep(0.05)
                continue
            for args in (["gc", "--max-gb", max_gb], ["compact", "--codec", ("raw", "zstd")[i % 2]],
                         ["verify", "--delete"]):
                said = io.StringIO()
                try:
                    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                        rc = cli(["cache", *args, "--cache-dir", str(cache)])
                except BaseException:  # noqa: BLE001 - anything out of a command is what the test looks for
                    rc, said = -1, io.StringIO(traceback.format_exc())
                out.write(json.dumps({"command": args[0], "rc": rc, "output": said.getvalue()[-2000:]}) + "\n")
                out.flush()
            i += 1


if __name__ == "__main__":
    loop(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
