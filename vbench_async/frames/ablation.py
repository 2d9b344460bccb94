"""Input ablations: the same cached frames with one part of the signal taken away, to prove that it reaches the model.

A model that sees scores above chance on questions about the video; with the frames blanked it must fall to chance,
with the frames reversed its answers about the direction of motion must flip, and with the timing lost (a wrong
source fps, or frames that claim to be consecutive) its answers about *when* must drift. `run --ablation KIND`
evaluates with one ablation; `perf/ablations.py` runs them all, for every backend and family. An ablated run is its
own result file (the ablation is part of the run's config hash), never mixed with the real one.

Each ablation changes what the backend receives (the pixels, or the metadata every backend turns into time
positions or timestamp text), in the loader, after the cache: the cache itself is never touched.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

ABLATIONS: dict[str, str] = {
    "blank": "every frame black (no pixels reach the model)",
    "shuffle": "frames in a random order (fixed per video), their timestamps kept",
    "reverse": "frames in reverse order, their timestamps kept (motion runs backwards)",
    "fps": "the source fps doubled in the metadata (every timestamp halves)",
    "timestamps": "the frame indices replaced by 0, 1, 2, ... (the timing of sparse sampling lost)",
}


def check(kind: str | None) -> None:
    if kind is not None and kind not in ABLATIONS:
        raise ValueError(f"unknown ablation {kind!r}; choose from {', '.join(ABLATIONS)}")


def ablate_frames(frames: np.ndarray, metadata: dict[str, Any], kind: str, key: str
                  ) -> tuple[np.ndarray, dict[str, Any]]:
    """(frames, metadata) with ablation `kind` applied; `key` (the cache key) seeds the shuffle."""
    check(kind)
    meta = dict(metadata)
    if kind == "blank":
        return np.zeros_like(frames), meta
    if kind == "shuffle":
        seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        order = np.random.default_rng(seed).permutation(len(frames))
        if len(frames) > 1 and (order == np.arange(len(frames))).all():  # never the identity
            order = np.roll(order, 1)
        return frames[order], meta
    if kind == "reverse":
        return frames[::-1].copy(), meta
    if kind == "fps":
        meta["fps"] = float(meta["fps"]) * 2
        meta["duration"] = float(meta["duration"]) / 2
        return frames, meta
    meta["frames_indices"] = list(range(len(frames)))  # "timestamps"
    return frames, meta


def ablate(video: Any, kind: str | None) -> Any:
    """A `backends.base.VideoInput` with `kind` applied (the same object when `kind` is None). Its uuid changes, so
    an engine that caches processed inputs by uuid never serves the real frames for the ablated ones."""
    if kind is None:
        return video
    frames, meta = ablate_frames(video.frames, video.metadata, kind, video.uuid)
    return dataclasses.replace(video, frames=frames, metadata=meta, uuid=f"{video.uuid}:ablation-{kind}")
