"""Ending a command's process quickly.

After an evaluation or a training run the heap holds millions of torch, vLLM and transformers objects, and the
interpreter's repeated garbage collections over them while it tears modules down cost 3-4 s of CPU per command. One
collection first, then a frozen heap, skips that work: results are fsynced and files closed before a command returns,
and the OS reclaims the memory anyway.
"""

from __future__ import annotations

import gc
import os
import signal
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


def sigterm_as_ctrl_c() -> None:
    """SIGTERM (a scheduler ending the job, `timeout`) stops the command as Ctrl-C does: one graceful path, finished
    results kept, a partial summary.

    A command started in the background of a script (`vbench-async run ... &` in a batch job) inherits SIGINT ignored,
    the shell's rule for background jobs; Python then installs no Ctrl-C handler, and the SIGTERM relayed as SIGINT
    would be ignored too: the run would go on after the scheduler asked it to stop. So the handler is restored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
