"""`FrameError`: a per-video failure of the frame pipeline (a `SampleError`, so the run records it and goes on)."""

from __future__ import annotations

from ..errors import SampleError
from .av_errors import in_words


class FrameError(SampleError):
    """A video that could not be turned into frames. `kind` is a `failure_kinds.FailureKind` (the one table of kinds:
    name on disk, final or transient, the user's hint); a worker's reply hands it over as its plain name."""

    def __init__(self, kind: str, message: str):
        # PyAV's "[Errno 1094995529] ..." says nothing to a user: every frame failure (a decoder's, a worker's
        # reply, one recorded in the cache) gives FFmpeg's codes in words.
        super().__init__(kind, in_words(message))
