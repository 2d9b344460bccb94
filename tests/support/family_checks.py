"""Per-family checks, written from each family's reference independently of vbench_async/families: which source
frames the reference takes, and how many frames a transformers processor output says the model sees. Every
registered family must have an entry in both (tests/test_families.py fails otherwise)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np


def _qwen(first: int, last: int, n: int) -> list[int]:
    import torch  # qwen-vl-utils: torch.linspace(start, end, nframes).round().long()

    return torch.linspace(first, last, n).round().long().tolist()


def _internvl(first: int, last: int, n: int) -> list[int]:
    # InternVL3 card, get_index(bound=None, fps, max_frame, first_idx=0, num_segments): segment middles.
    seg_size = float(last - first) / n
    return np.array([int(first + (seg_size / 2) + np.round(seg_size * idx)) for idx in range(n)]).tolist()


def _llava(first: int, last: int, n: int) -> list[int]:
    # LLaVA-NeXT video_demo.load_video: np.linspace(0, total_frame_num - 1, max_frames_num, dtype=int)
    return np.linspace(first, last, n, dtype=int).tolist()


def _glm(first: int, last: int, n: int) -> list[int]:
    # Glm4vVideoProcessor.sample_frames (the authors' sampling in transformers) for a source whose duration x 2 fps is
    # n: [min(max_frame_idx, ceil(i * source_fps / 2)) for i in range(n)], duplicates dropped, an odd count padded.
    count = last - first + 1
    source_fps = count / (n / 2)
    picked = list(dict.fromkeys(min(count - 1, int(math.ceil(i * source_fps / 2))) for i in range(n)))
    if len(picked) & 1:
        picked.append(picked[-1])
    return [first + i for i in picked]


REFERENCE_INDICES: dict[str, Callable[[int, int, int], list[int]]] = {
    "qwen2-vl": _qwen, "qwen2.5-vl": _qwen, "qwen3-vl": _qwen,
    "internvl": _internvl, "llava-onevision": _llava, "glm-4.1v": _glm,
}


def _grid_frames(batch: Any) -> int:
    return int(batch["video_grid_thw"][0][0]) * 2  # temporal patches x 2 frames


FRAMES_SEEN: dict[str, Callable[[Any], int]] = {
    "qwen2-vl": _grid_frames, "qwen2.5-vl": _grid_frames, "qwen3-vl": _grid_frames, "glm-4.1v": _grid_frames,
    "internvl": lambda batch: int(batch["pixel_values"].shape[0]),  # one tile per frame
    "llava-onevision": lambda batch: int(batch["pixel_values_videos"].shape[1]),
}
