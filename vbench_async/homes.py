"""Where vbench-async keeps what it builds and caches, in one place (light: command-line help reads it).

The home (`$VBENCH_ASYNC_HOME`, else ~/.cache/vbench-async) holds the tiny models, the demo suite and, unless
`$VBENCH_ASYNC_CACHE` names another folder, the frame cache (<home>/frames).
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "VBENCH_ASYNC_HOME"
CACHE_ENV = "VBENCH_ASYNC_CACHE"
CACHE_DIR_HELP = ("frame cache (default: $VBENCH_ASYNC_CACHE, else $VBENCH_ASYNC_HOME/frames, else "
                  "~/.cache/vbench-async/frames)")


def default_home() -> Path:
    """Where built artifacts live: `$VBENCH_ASYNC_HOME`, else `~/.cache/vbench-async`."""
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vbench-async"


def default_cache_dir() -> Path:
    """$VBENCH_ASYNC_CACHE, else <home>/frames."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else default_home() / "frames"
