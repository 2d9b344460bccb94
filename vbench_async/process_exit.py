"""Ending a command's process quickly.

After an evaluation or a training run the heap holds millions of torch, vLLM and transformers objects, and the
interpreter's repeated garbage collections over them while it tears modules down cost 3-4 s of CPU per command. One
collection first, then a frozen heap, skips that work: results are fsynced and files closed before a command returns,
and the OS reclaims the memory anyway.
"""

from __future__ import annotations

import gc
import os
import sys

INTERRUPTED = 130


def exit_now(code: int) -> None:
    """Flush the standard streams, freeze the heap, and exit with `code`.

    An interrupted command (exit code 130) leaves at once, without atexit handlers: after a Ctrl-C during the engine's
    start-up, multiprocessing's handler would wait for the half-started engine-core process (up to a minute); the
    orphan guard, left armed for that case, stops it instead (vbench_async/backends/guard.py)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code == INTERRUPTED:
        os._exit(code)
    gc.collect()  # once, while every module is intact: objects in cycles (an engine) still get a clean __del__
    gc.freeze()
    sys.exit(code)
