"""Wall-clock marks of a command's phases, for perf/e2e.py's breakdown of a run (imports, plan, engine start, loop,
summary, site, exit).

With $VBENCH_ASYNC_PHASES naming a file, `mark(name)` appends one JSON line {"phase": name, "t": unix time}; without
it, a mark costs one environment lookup and writes nothing.
"""

from __future__ import annotations

import json
import os
import time

PHASES_ENV = "VBENCH_ASYNC_PHASES"


def mark(name: str) -> None:
    path = os.environ.get(PHASES_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"phase": name, "t": time.time()}) + "\n")
