"""Metadata consistency through the real HF processors (tiny local checkpoints): cached frames + metadata give the
Qwen3-VL `<t seconds>` strings and the Qwen2.5-VL temporal grid / second_per_grid_ts that the source frame indices
and source fps imply, identical to the on-the-fly path (decoding in this process, no cache)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from support.videos import write_video

from vbench_async.frames import CachedVideo, FrameCache, FrameSpec
from vbench_async.frames.decode_video import decode_video

PROMPT = "<|vision_start|><|video_pad|><|vision_end|>What happens?"


@pytest.fixture(scope="module")
def processors() -> dict:
    from transformers import AutoProcessor

    from vbench_async.demo.tiny_models import ensure_tiny_model

    return {
        family: AutoProcessor.from_pretrained(ensure_tiny_model(f"tiny-{family}"))
        for family in ("qwen3-vl", "qwen2.5-vl")
    }


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("proc")
    return {
        "10s": write_video(d / "ten.mp4", frames=300, fps=30),
        "ntsc": write_video(d / "ntsc.mp4", frames=250, fps=30000 / 1001, gop=30),
        "short": write_video(d / "short.mp4", frames=10, fps=30),
    }


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with FrameCache(tmp_path_factory.mktemp("proc_cache"), workers=1) as c:
        yield c


def _run(processor, video: CachedVideo) -> dict:
    out = processor(
        text=[PROMPT], videos=[video.frames], video_metadata=[video.hf_metadata()], return_tensors="np",
        **video.processor_kwargs(),
    )
    text = processor.tokenizer.decode(out["input_ids"][0])
    return {
        "timestamps": re.findall(r"<(\d+\.\d) seconds>", text),
        "grid": out["video_grid_thw"].tolist(),
        "pixels": np.asarray(out["pixel_values_videos"]),
        "second_per_grid": out.get("second_per_grid_ts"),
    }


def _on_the_fly(path: Path, spec: FrameSpec, window=None) -> CachedVideo:
    frames, meta = decode_video(path, spec, window, decoder="decord")  # another decoder: same frames, same metadata
    return CachedVideo(key="", frames=frames, meta=meta)


def test_qwen3_timestamps_from_cached_metadata(processors, cache, clips) -> None:
    spec = FrameSpec("qwen3-vl", max_frames=8, min_pixels=16 * 1024, max_pixels=48 * 1024)
    cached = cache.get_or_decode(clips["10s"], spec)
    assert list(cached.meta.frames_indices) == [0, 43, 85, 128, 171, 214, 256, 299]
    got = _run(processors["qwen3-vl"], cached)
    # Pairs of source frames at 30 fps: (0+43)/60 = 0.72, (85+128)/60 = 3.55, (171+214)/60 = 6.42, (256+299)/60 = 9.25
    assert got["timestamps"] == ["0.7", "3.5", "6.4", "9.2"]
    assert got["timestamps"] == [f"{t:.1f}" for t in cached.timestamps()]
    height, width = cached.frames.shape[1:3]
    assert got["grid"] == [[4, height // 16, width // 16]]  # no resampling, no resize by the processor
    fly = _run(processors["qwen3-vl"], _on_the_fly(clips["10s"], spec))
    assert fly["timestamps"] == got["timestamps"] and fly["grid"] == got["grid"]
    assert np.abs(fly["pixels"] - got["pixels"]).mean() < 0.05  # decord vs PyAV: the same frames, within codec noise


def test_qwen3_timestamps_of_a_window_are_absolute(processors, cache, clips) -> None:
    spec = FrameSpec("qwen3-vl", max_frames=8, min_pixels=16 * 1024, max_pixels=48 * 1024)
    cached = cache.get_or_decode(clips["ntsc"], spec, window=(2.0, 6.0))
    indices, fps = cached.meta.frames_indices, cached.meta.fps
    assert fps == pytest.approx(29.97, abs=1e-3) and cached.meta.window_frames == (60, 179)  # ceil(59.94), floor(179.8)
    expected = [f"{(indices[i] + indices[i + 1]) / 2 / fps:.1f}" for i in range(0, len(indices), 2)]
    got = _run(processors["qwen3-vl"], cached)
    assert got["timestamps"] == expected and float(expected[0]) >= 2.0 and float(expected[-1]) <= 6.0
    assert _run(processors["qwen3-vl"], _on_the_fly(clips["ntsc"], spec, (2.0, 6.0)))["timestamps"] == expected


@pytest.mark.parametrize(
    "clip, nframes, frames, second_per_grid",
    [
        ("10s", 8, 8, 2 / (8 / 300 * 30)),  # 8 of 300 frames at 30 fps: sampled at 0.8 fps -> 2.5 s per grid
        ("short", 16, 10, 2 / (10 / 10 * 30)),  # clamped to the 10 frames there are: 1/15 s per grid
    ],
)
def test_qwen25_grid_and_second_per_grid(processors, cache, clips, clip, nframes, frames, second_per_grid) -> None:
    spec = FrameSpec("qwen2.5-vl", nframes=nframes, min_pixels=16 * 784, max_pixels=48 * 784)
    cached = cache.get_or_decode(clips[clip], spec)
    assert cached.frames.shape[0] == frames and cached.meta.clamped == (frames < nframes)
    got = _run(processors["qwen2.5-vl"], cached)
    height, width = cached.frames.shape[1:3]
    assert got["grid"] == [[frames // 2, height // 14, width // 14]]
    assert float(got["second_per_grid"][0]) == pytest.approx(second_per_grid)
    assert cached.meta.sample_fps == pytest.approx(2 / second_per_grid)
    fly = _run(processors["qwen2.5-vl"], _on_the_fly(clips[clip], spec))
    assert fly["grid"] == got["grid"] and float(fly["second_per_grid"][0]) == pytest.approx(second_per_grid)
