"""Frames: sampling rules (spec), decoders, the content-addressed frame cache, and batch preprocessing.

Every consumer (vLLM, the HF processor, the trainer) gets the same uint8 frames plus their source metadata and
passes `do_sample_frames=False, do_resize=False`, so nothing is sampled or resized twice (where a maker's pipeline
lets its processor resize a second time, `second_resize_max_pixels` makes the cache do that resize too).
"""

from .cache import FrameCache
from .decoders import DECODERS, DEFAULT_DECODER
from .disk_budget import CacheFit, PlannedEntry, check_cache_fit
from .errors import FrameError
from .frame_settings import FrameSettings
from .layout import FailureRecord, default_cache_dir
from .preprocess import PreprocessReport, VideoFailure, VideoJob, preprocess
from .resize import load_image
from .spec import FrameSpec, resolve_frame_spec
from .video import PROCESSOR_KWARGS, CachedVideo, VideoMeta

__all__ = [
    "CacheFit",
    "PlannedEntry",
    "check_cache_fit",
    "DECODERS",
    "DEFAULT_DECODER",
    "PROCESSOR_KWARGS",
    "CachedVideo",
    "FailureRecord",
    "FrameCache",
    "FrameError",
    "FrameSettings",
    "FrameSpec",
    "PreprocessReport",
    "VideoFailure",
    "VideoJob",
    "VideoMeta",
    "default_cache_dir",
    "load_image",
    "preprocess",
    "resolve_frame_spec",
]
