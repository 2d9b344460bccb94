"""`FrameError`: a per-video failure of the frame pipeline (a `SampleError`, so the run records it and goes on)."""

from __future__ import annotations

from ..errors import SampleError
from .av_errors import in_words

# Stable kinds, used in summaries, failure records and tests.
VIDEO_MISSING = "video_missing"  # the path does not exist (or is not a file)
VIDEO_EMPTY = "video_empty"  # zero bytes, or a stream with no decodable frame
NO_VIDEO_STREAM = "no_video_stream"  # a valid container without a video stream (audio-only mp4)
DECODE_ERROR = "decode_error"  # the decoder could not open or read the file (truncated, not a video, ...)
DECODE_TIMEOUT = "decode_timeout"  # the worker process ran past the timeout and was killed
DECODER_CRASH = "decoder_crash"  # the worker process died (segfault, out of memory)
WINDOW_INVALID = "window_invalid"  # the (start, end) window selects no frame of this video
IMAGE_TOO_LARGE = "image_too_large"  # an image claiming more pixels than PIL's decompression-bomb limit
ASPECT_RATIO = "aspect_ratio"  # frames too thin for the Qwen resize rules (ratio above 200)
WORKER_ERROR = "worker_error"  # the decode worker could not start: an environment problem, never recorded
CACHE_CONTENDED = "cache_contended"  # decoded, but the entry was removed or replaced before it was read: transient


class FrameError(SampleError):
    """A video that could not be turned into frames. `kind` is one of the constants above."""

    def __init__(self, kind: str, message: str):
        # PyAV's "[Errno 1094995529] ..." says nothing to a user: every frame failure (a decoder's, a worker's
        # reply, one recorded in the cache) gives FFmpeg's codes in words.
        super().__init__(kind, in_words(message))
