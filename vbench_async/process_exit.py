"""Ending a command's process quickly.

After an evaluation or a training run the heap holds millions of torch, vLLM and transformers objects, and the
interpreter's garbage collections over them while it tears modules down cost about a second of CPU per command
(measured: 0.65 s in `gc.collect()` alone after a 120-question run). Everything that matters has happened by the
time a command returns: results are fsynced and their files closed, the engine is shut down. So the process does
what the interpreter's own shutdown does that can matter (join the threads that are not daemons, run the atexit
handlers, which flush and close the log files) and leaves without the teardown: the OS reclaims the memory.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

INTERRUPTED = 130


def exit_now(code: int) -> None:
    """Finish what the interpreter's shutdown would (non-daemon threads, atexit handlers, the standard streams) and
    exit with `code`, skipping the teardown of the modules and the heap.

    An interrupted command (exit code 130) leaves at once, without atexit handlers: after a Ctrl-C during the engine's
    start-up, multiprocessing's handler would wait for the half-started engine-core process (up to a minute); the
    orphan guard, left armed for that case, stops it instead (vbench_async/backends/guard.py)."""
    _flush()
    if code == INTERRUPTED:
        os._exit(code)
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler or coverage writes its data in the interpreter's own shutdown
    try:
        # The interpreter's first two shutdown steps, in its order: wait for the non-daemon threads (a pool's
        # workers are told to stop first), then the atexit handlers (logging.shutdown flushes every handler).
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - never lose an exit code: the slow, complete path instead
        sys.exit(code)
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed or replaced stream
            pass


def sigterm_as_ctrl_c() -> None:
    """SIGTERM (a scheduler ending the job, `timeout`) stops the command as Ctrl-C does: one graceful path, finished
    results kept, a partial summary.

    A command started in the background of a script (`vbench-async run ... &` in a batch job) inherits SIGINT ignored,
    the shell's rule for background jobs; Python then installs no Ctrl-C handler, and the SIGTERM relayed as SIGINT
    would be ignored too: the run would go on after the scheduler asked it to stop. So the handler is restored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
