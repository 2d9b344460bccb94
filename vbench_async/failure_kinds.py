"""Which failures are the input's fault (final), which may pass (retried by the next run), and which are the
environment's (the run stops and nothing is recorded against a sample).

A result line with a *final* kind is that sample's result: re-running the same command keeps it (`--retry-failed`
tries it again). A line with a *transient* kind is not: the next run evaluates the sample again by default, and a run
holding one is not complete. An *environment* fault (disk full, read-only or unwritable cache or output directory)
never becomes a result line: the run stops with one message saying which path, what went wrong and what to do.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UserError

if TYPE_CHECKING:
    from .result import Result

# Caused by the input itself: the same input fails the same way again.
FINAL_KINDS = frozenset({
    "video_missing", "video_empty", "no_video_stream", "decode_error", "window_invalid", "aspect_ratio",
    "record_invalid", "path_unsafe", "task_type_mismatch", "engine_error", "server_error", "result_invalid",
})
# May pass on the next try: load on the machine or the server, a crashed helper process.
TRANSIENT_KINDS = frozenset({
    "decode_timeout", "decoder_crash", "worker_error", "frame_error", "server_unavailable", "cache_contended",
})
# The environment, not the sample: never stored as a result (the run stops instead).
CACHE_UNWRITABLE = "cache_unwritable"
ENVIRONMENT_KINDS = frozenset({CACHE_UNWRITABLE})

# errno values that say "this machine cannot write there", whatever file it was.
_ENV_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENOENT, errno.ENOTDIR}


class EnvironmentFault(UserError):
    """The run cannot go on in this environment (a full disk, a read-only directory). Finished lines are kept."""


def is_final(result: Result) -> bool:
    """Whether a result line settles its sample: no error, or an error the input itself caused."""
    return not result.failed or is_final_kind(result.error_kind)


def is_final_kind(kind: str | None) -> bool:
    """Whether a failure of this kind settles its sample (the input caused it: the same input fails again)."""
    return kind not in TRANSIENT_KINDS and kind not in ENVIRONMENT_KINDS


def is_environment_oserror(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _ENV_ERRNOS


def environment_fault(what: str, path: Path | str | None, exc: OSError | str) -> EnvironmentFault:
    """One clear message: what could not be written, where, why, and what to do."""
    reason = exc if isinstance(exc, str) else (exc.strerror or str(exc))
    where = f" {path}" if path else ""
    hint = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (disk quota exceeded)",
            errno.EROFS: "choose a writable directory", errno.EACCES: "fix its permissions or choose another "
                                                                      "directory",
            errno.EPERM: "fix its permissions or choose another directory"}.get(
        getattr(exc, "errno", None), "free some space or make it writable (or choose another directory)")
    return EnvironmentFault(f"cannot write the {what}{where}: {reason}. Nothing was recorded against a sample; "
                            f"{hint}, then re-run the same command (finished results are kept).")
