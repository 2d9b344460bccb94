"""Which failures are the input's fault (final), which may pass (retried by the next run), and which are the
environment's (the run stops and nothing is recorded against a sample).

A result line with a *final* kind is that sample's result: re-running the same command keeps it (`--retry-failed`
tries it again). A line with a *transient* kind is not: the next run evaluates the sample again by default, and a run
holding one is not complete. An *environment* fault (disk full, read-only or unwritable cache or output directory)
never becomes a result line: the run stops with one message saying which path, what went wrong and what to do.

`FailureKind` is the one table of kinds (name on disk, fate, hint): the frame pipeline, the backends, scoring, the
results and the console all name kinds through it, and the sets below are derived from it. A kind not in it (from an
older version's file) counts as final, as before.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from pathlib import Path

from .errors import UserError


class Fate(StrEnum):
    """What a failure of a kind means for its sample (the module docstring says why each is so)."""

    FINAL = "final"  # caused by the input itself: the same input fails the same way again
    TRANSIENT = "transient"  # may pass on the next try: load on the machine or the server, a crashed helper process
    ENVIRONMENT = "environment"  # the machine's, not the sample's: never stored as a result (the run stops instead)


# Hints shared by several kinds (an Enum body would take them for members, so they live out here).
_DATA = "check the data: `data check` (below) lists missing or unreadable files"
_RECORD = "fix the annotation records: `vbench-async data validate FILE`"
_AGAIN = "transient: re-run the same command (such samples are evaluated again)"
_BUG = "the message is in the result line's 'error' field (a bug: please report it with that message)"


class FailureKind(StrEnum):
    """Every kind of failure a result line (or a frame-cache failure record) can hold: its name, as written to disk,
    its `fate` and the `hint` a user sees next to its count. The one table: every layer names kinds through it.

    A member is a `str` equal to its name, so result files keep exactly the same strings, and a kind read back from
    disk (a plain string) compares equal to its member."""

    fate: Fate
    hint: str

    def __new__(cls, name: str, fate: Fate, hint: str) -> FailureKind:
        member = str.__new__(cls, name)
        member._value_ = name
        member.fate = fate
        member.hint = hint
        return member

    # -- the input's fault: final
    VIDEO_MISSING = ("video_missing", Fate.FINAL,  # the path does not exist (or is not a file)
                     "the video is not where the record says: check --data-root or the data map (README, 'Data "
                     "maps'); " + _DATA.split(": ", 1)[1])
    VIDEO_EMPTY = "video_empty", Fate.FINAL, _DATA  # zero bytes, or a stream with no decodable frame
    NO_VIDEO_STREAM = "no_video_stream", Fate.FINAL, _DATA  # a valid container without a video stream
    DECODE_ERROR = "decode_error", Fate.FINAL, _DATA  # the decoder could not open or read the file (truncated, ...)
    IMAGE_ERROR = "image_error", Fate.FINAL, _DATA  # an image the loader did not foresee (evaluation/pipeline.py)
    IMAGE_TOO_LARGE = ("image_too_large", Fate.FINAL,  # more pixels than PIL's decompression-bomb limit
                       "an image claims more pixels than is safe to load: shrink or replace it")
    WINDOW_INVALID = "window_invalid", Fate.FINAL, _RECORD  # the (start, end) window selects no frame of the video
    ASPECT_RATIO = "aspect_ratio", Fate.FINAL, _RECORD  # frames too thin for the Qwen resize rules (ratio above 200)
    RECORD_INVALID = "record_invalid", Fate.FINAL, _RECORD  # a record that is not a sample (bad JSON, a field missing)
    TASK_TYPE_MISMATCH = "task_type_mismatch", Fate.FINAL, _RECORD  # a problem type the benchmark does not have
    PATH_UNSAFE = ("path_unsafe", Fate.FINAL,
                   "a record points outside --data-root: fix it, or pass --allow-outside-root if that is intended")
    CONTEXT_OVERFLOW = ("context_overflow", Fate.FINAL,  # found by the workload plan, before any request
                        "the prompt does not fit the engine's context: lower --max-frames (or --max-pixels), or "
                        "raise --max-model-len")
    PROMPT_ERROR = "prompt_error", Fate.FINAL, "the prompt template failed on the record: " + _BUG
    ENGINE_ERROR = ("engine_error", Fate.FINAL,
                    "the engine rejected the request: the message is in the result line's 'error' field and the "
                    "engine's own in OUTPUT_DIR/logs/engine.log")
    SERVER_ERROR = ("server_error", Fate.FINAL,
                    "the server rejected the request: check --served-model and the server's log")
    SCORE_ERROR = "score_error", Fate.FINAL, "the scorer failed on the answer (not a wrong answer): " + _BUG
    RESULT_INVALID = "result_invalid", Fate.FINAL, "the scorer gave a value a result cannot hold: " + _BUG

    # -- may pass on the next try: transient
    DECODE_TIMEOUT = "decode_timeout", Fate.TRANSIENT, _AGAIN  # the worker ran past the timeout and was killed
    DECODER_CRASH = "decoder_crash", Fate.TRANSIENT, _AGAIN  # the worker process died (segfault, out of memory)
    WORKER_ERROR = "worker_error", Fate.TRANSIENT, _AGAIN  # the decode worker could not start
    FRAME_ERROR = "frame_error", Fate.TRANSIENT, _AGAIN  # the frame loader failed in a way it did not foresee
    CACHE_CONTENDED = "cache_contended", Fate.TRANSIENT, _AGAIN  # the entry was removed or replaced before it was read
    SERVER_UNAVAILABLE = ("server_unavailable", Fate.TRANSIENT,
                          "the server did not answer: check --base-url and that it is up; " + _AGAIN)

    # -- the environment's: never a result line
    CACHE_UNWRITABLE = ("cache_unwritable", Fate.ENVIRONMENT,
                        "the frame cache cannot be written: free some space or make it writable, then re-run")

    @classmethod
    def named(cls, name: str) -> FailureKind | None:
        """The member written as `name` on disk; None for a name this version does not know (an older file's)."""
        return _BY_NAME.get(name)


_BY_NAME: dict[str, FailureKind] = {str(kind): kind for kind in FailureKind}


def kinds_of(fate: Fate) -> frozenset[FailureKind]:
    """The kinds of one fate (members hash like their names, so a plain string from disk is found in the set)."""
    return frozenset(kind for kind in FailureKind if kind.fate is fate)


FINAL_KINDS = kinds_of(Fate.FINAL)
TRANSIENT_KINDS = kinds_of(Fate.TRANSIENT)
ENVIRONMENT_KINDS = kinds_of(Fate.ENVIRONMENT)

# errno values that say "this machine cannot write there", whatever file it was.
_ENV_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENOENT, errno.ENOTDIR}


class EnvironmentFault(UserError):
    """The run cannot go on in this environment (a full disk, a read-only directory). Finished lines are kept."""


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
