"""Metadata consistency through the real vLLM engine: the prompt token ids vLLM builds from cached frames carry the
Qwen3-VL `<t seconds>` strings that source frame indices / source fps imply, identical to the on-the-fly path and to
the HF processor; for Qwen2.5-VL, vLLM's video token count equals the HF processor's temporal x spatial grid."""

from __future__ import annotations

import asyncio
import re

import pytest
from support.videos import write_video

from vbench_async.backends.base import Request, SamplingParams, VideoInput
from vbench_async.backends.vllm import VLLMBackend
from vbench_async.demo.tiny_models import ensure_tiny_model
from vbench_async.frames import CachedVideo, FrameCache, FrameSpec
from vbench_async.frames.decode_video import decode_video

pytestmark = pytest.mark.vllm


def _prompt_ids(family: str, videos: list[CachedVideo]) -> tuple[list[list[int]], object]:
    """Prompt token ids that the real engine builds for each video (one engine for all)."""

    async def go():
        backend = VLLMBackend(str(ensure_tiny_model(f"tiny-{family}")))
        await backend.start()
        try:
            outs = []
            for i, v in enumerate(videos):
                req = Request(request_id=f"r{i}", prompt="What happens?", sampling=SamplingParams(max_tokens=1),
                              videos=(VideoInput(v.frames, v.hf_metadata(), v.key or f"fly{i}"),))
                outs.append((await backend.generate(req)).prompt_token_ids)
            return outs, backend._processor
        finally:
            await backend.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("vclips")
    return {"ntsc": write_video(d / "ntsc.mp4", frames=250, fps=30000 / 1001, gop=30),
            "10s": write_video(d / "ten.mp4", frames=300, fps=30)}


def test_qwen3_vllm_timestamps_equal_source_times_and_on_the_fly(clips, tmp_path):
    spec = FrameSpec(family="qwen3-vl", fps=2.0, max_frames=8, max_pixels=64 * 64 * 4)
    with FrameCache(tmp_path / "cache", workers=1) as cache:
        cached = cache.get_or_decode(clips["ntsc"], spec)
        windowed = cache.get_or_decode(clips["ntsc"], spec, (2.0, 6.0))
    frames, meta = decode_video(clips["ntsc"], spec, decoder="decord")  # the on-the-fly path, another decoder
    fly = CachedVideo(key="", frames=frames, meta=meta)
    ids, processor = _prompt_ids("qwen3-vl", [cached, fly, windowed])
    stamps = [re.findall(r"<(\d+\.\d) seconds>", processor.tokenizer.decode(i)) for i in ids]
    expected = [f"{t:.1f}" for t in cached.timestamps()]
    assert stamps[0] == expected and len(expected) == len(cached.frames) // 2
    # Expected by hand from the source: mean time of each temporal pair of source frames at 29.97 fps.
    by_hand = [f"{(a + b) / 2 / (30000 / 1001):.1f}" for a, b in zip(cached.meta.frames_indices[::2],
                                                                     cached.meta.frames_indices[1::2])]
    assert stamps[0] == by_hand
    assert stamps[1] == stamps[0]
    # A window keeps absolute source times.
    assert stamps[2] == [f"{t:.1f}" for t in windowed.timestamps()]
    assert 2.0 <= float(stamps[2][0]) and float(stamps[2][-1]) <= 6.0


@pytest.mark.slow  # by default, test_backends checks the same counts over the whole demo suite (hf vs vLLM)
def test_qwen25_vllm_video_tokens_match_hf_grid(clips, tmp_path):
    spec = FrameSpec(family="qwen2.5-vl", fps=2.0, max_frames=8, max_pixels=64 * 64 * 4)
    with FrameCache(tmp_path / "cache", workers=1) as cache:
        cached = cache.get_or_decode(clips["10s"], spec)
    ids, processor = _prompt_ids("qwen2.5-vl", [cached])
    hf = processor(text=["<|vision_start|><|video_pad|><|vision_end|>"], videos=[cached.frames],
                   video_metadata=[cached.hf_metadata()], return_tensors="np", **cached.processor_kwargs())
    t, h, w = hf["video_grid_thw"][0]
    expected_tokens = int(t * h * w) // 4  # 2x2 spatial merge
    video_pad = processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert ids[0].count(video_pad) == expected_tokens
    assert t == len(cached.frames) // 2
    # second_per_grid_ts from source metadata: temporal patch / effective sampling fps.
    assert hf["second_per_grid_ts"][0] == pytest.approx(2 / cached.meta.sample_fps, rel=1e-4)
