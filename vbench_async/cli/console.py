"""The console of a command that starts an engine: this package's lines on the terminal, the libraries' in a log file.

What reaches the terminal by default: the progress bars, the start-up line, this package's warnings and the final
table. Everything else goes to `RUN_DIR/logs/engine.log`: vLLM's `vllm` logger (configured through
VLLM_LOGGING_CONFIG_PATH, in this process and in the engine-core process vLLM spawns), transformers' and torch's
loggers, Python warnings, and whatever a library or a child process writes to file descriptors 1 and 2 (torch's C++
warnings, vLLM's weight-loading bars, the engine core's own output, multiprocessing's resource tracker).

How: descriptors 1 and 2 are pointed at the log file, and sys.stdout / sys.stderr become copies of the terminal's
descriptors. Child processes inherit 1 and 2, so they write to the log. Library handlers created before the switch
hold the old stream objects, which now write to the log too; torch and transformers are imported first for that reason
(their handlers bind sys.stderr when they are imported). `--verbose` leaves the descriptors alone and logs everything
live, and to the log file as well.

The resource tracker's "leaked semaphore objects" warning at the end of a run: vLLM's engine core creates a
multiprocessing lock (tqdm's, for its weight-loading bar) and is killed without a wait on CPU
(backends/vllm.py CPU_SHUTDOWN_S) before its exit handlers unlink it; the tracker unlinks it and says so. That is
engine chatter: it goes to the log with the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
from pathlib import Path
from typing import Iterator, TextIO

from ..errors import UserError
from ..redact import scrub_handlers

LOG_FORMAT = "%(asctime)s %(processName)s pid=%(process)d %(levelname)s %(name)s: %(message)s"
CONSOLE_FORMAT = "%(levelname)s: %(message)s"
PACKAGE = __name__.split(".")[0]
_CONFIGURED: set[str] = set()  # the log files this process's vLLM configurations write to


def engine_log_path(run_dir: Path) -> Path:
    return Path(run_dir) / "logs" / "engine.log"


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """`COMMAND --verbose` as well as `vbench-async -v COMMAND` (SUPPRESS keeps the latter's value when absent)."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show debug messages and the engine's logs live (they always go to "
                             "OUTPUT_DIR/logs/engine.log)")


def configure_logging(verbose: bool) -> None:
    """Every command's logging before it runs: this package's messages on stderr (debug ones with --verbose),
    scrubbed of secrets (a library's record too: httpx logs each request's URL)."""
    root = logging.getLogger()
    before = list(root.handlers)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    scrub_handlers(*(h for h in root.handlers if h not in before))


@contextlib.contextmanager
def engine_console(log_path: Path, verbose: bool = False, engine_in_process: bool = True) -> Iterator[Path]:
    """Send the libraries' output to `log_path` for the duration of the block (see the module docstring).
    `engine_in_process` False (a server does the work): torch and transformers are not imported beforehand, since
    such a run never loads them."""
    log = _open_log(log_path)
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_env = {k: os.environ.get(k) for k in ("VLLM_LOGGING_CONFIG_PATH",)}
    swap = not verbose and _real_descriptors()
    if swap and engine_in_process:
        _import_loud_libraries()
    console_out, console_err = sys.stdout, sys.stderr
    saved_fds: tuple[int, int] | None = None
    vllm_handlers: list[logging.Handler] | None = None
    try:
        if swap:
            sys.stdout.flush()
            sys.stderr.flush()
            saved_fds = (os.dup(1), os.dup(2))
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            console_out = _terminal(saved_fds[0], sys.stdout)
            console_err = _terminal(saved_fds[1], sys.stderr)
            sys.stdout, sys.stderr = console_out, console_err
        _configure_vllm(log_path, verbose)
        file_handler = logging.StreamHandler(log)  # a stream handler: vLLM's dictConfig closes FileHandlers
        file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
        file_handler.setLevel(logging.DEBUG if verbose else logging.INFO)
        terminal = logging.StreamHandler(console_err)
        terminal.setFormatter(logging.Formatter(CONSOLE_FORMAT))
        if not verbose:  # the warnings that matter: this package's
            terminal.setLevel(logging.WARNING)
            terminal.addFilter(lambda record: record.name.split(".")[0] == PACKAGE)
        scrub_handlers(file_handler, terminal)  # no secret in the log or on the terminal, whoever logs it
        root.handlers = [file_handler, terminal]
        root.setLevel(logging.DEBUG if verbose else logging.INFO)
        vllm_handlers = _repoint_vllm(file_handler)
        logging.captureWarnings(True)  # libraries' DeprecationWarnings and the like: the log, not the terminal
        yield log_path
    finally:
        logging.captureWarnings(False)
        root.handlers, root.level = saved_handlers, saved_level
        if vllm_handlers is not None:
            logging.getLogger("vllm").handlers = vllm_handlers
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if saved_fds is not None:
            for stream in (console_out, console_err, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            for stream in (console_out, console_err):
                with contextlib.suppress(Exception):
                    stream.close()  # closes the duplicated descriptors
        log.close()


def _repoint_vllm(file_handler: logging.Handler) -> list[logging.Handler] | None:
    """vLLM reads its logging configuration once per process, so an engine kept from an earlier block (a sweep's
    budgets, one engine) still logs into that block's file: for this block its records go to this block's log.
    Returns the handlers to put back, or None when vLLM's logger is not one this module configured."""
    vllm = logging.getLogger("vllm")
    ours = [h for h in vllm.handlers if getattr(h, "baseFilename", None) in _CONFIGURED]
    if not ours:
        return None
    saved = vllm.handlers[:]
    vllm.handlers = [file_handler if h in ours else h for h in saved]
    return saved


def _open_log(path: Path) -> TextIO:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise UserError(f"cannot write the run directory {path.parent.parent}: {exc.strerror or exc}; choose a "
                        "writable --output-dir") from exc
    return open(fd, "a", buffering=1, encoding="utf-8", errors="replace")


def _real_descriptors() -> bool:
    """Whether sys.stdout/sys.stderr are descriptors 1 and 2 (not a test's or a notebook's replacement)."""
    try:
        return sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False


def _terminal(fd: int, like: TextIO) -> TextIO:
    return open(fd, "w", buffering=1, encoding=getattr(like, "encoding", None) or "utf-8",
                errors=getattr(like, "errors", None) or "replace")


def _import_loud_libraries() -> None:
    """Import the libraries whose log handlers bind sys.stderr at import, while it is still descriptor 2."""
    for name in ("torch", "transformers.utils.logging"):
        with contextlib.suppress(ImportError):
            __import__(name)


def _configure_vllm(log_path: Path, verbose: bool) -> None:
    """vLLM configures its `vllm` logger from VLLM_LOGGING_CONFIG_PATH when the engine is built, in this process and in
    the engine core it spawns: a file handler on the log (and the terminal with --verbose). A user's own
    configuration, or VLLM_CONFIGURE_LOGGING=0, is left as it is."""
    if os.environ.get("VLLM_LOGGING_CONFIG_PATH") or os.environ.get("VLLM_CONFIGURE_LOGGING", "1") == "0":
        return
    level = "DEBUG" if verbose else "INFO"
    handlers = {"file": {"class": "logging.FileHandler", "filename": os.path.abspath(log_path), "mode": "a",
                         "encoding": "utf-8", "formatter": "plain", "level": level}}
    if verbose:
        handlers["terminal"] = {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "plain",
                                "level": level}
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"()": "vbench_async.redact.ScrubbingFormatter", "fmt": LOG_FORMAT}},
        "handlers": handlers,
        "loggers": {"vllm": {"handlers": list(handlers), "level": level, "propagate": False}},
    }
    _CONFIGURED.add(os.path.abspath(log_path))
    path = log_path.with_name("vllm-logging.json")
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(path)
