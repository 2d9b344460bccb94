"""The math-check worker process: one JSON request a line on stdin, one JSON answer a line on stdout.

    {"fn": "equivalence" | "plain_verify", "args": [...]}  ->  {"result": ...}  or  {"error": "Type: message"}

after a first {"ready": true} once math-verify is imported (inside the start-up allowance, not a check's limit).

Started by `math_task` as `python -m vbench_async.scoring.math_worker`, so it never depends on how the caller was
started (a script read on standard input or a notebook cannot be re-imported, which multiprocessing's spawn needs),
and nothing but JSON crosses the pipe.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from ..worker_process import ReadyMessage


def _functions() -> dict[str, Callable[..., Any]]:
    from .math_task import _plain_verify, check_equivalence

    return {"equivalence": check_equivalence, "plain_verify": _plain_verify}


def main() -> None:
    import math_verify  # noqa: F401 - before the ready message: the import is start-up, not a check's time

    functions = _functions()
    sys.stdout.write(json.dumps(ReadyMessage(ready=True).to_json()) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            answer: dict[str, Any] = {"result": functions[request["fn"]](*request["args"])}
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which decides
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
