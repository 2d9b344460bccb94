"""The batched transformers backend (vbench_async/backends/hf.py): requests in flight together run as one left-padded
`generate` call, with the answers each gets alone.

On the tiny random-weight Qwen2.5-VL and Qwen3-VL checkpoints, over demo-suite questions with their real frames from
the frame cache and a text-only prompt (prompts of different lengths, so rows are padded): the greedy token ids, texts
and per-request fields of a batch equal those of one-at-a-time generation, through the batch call and through
concurrent `generate` calls. Also: a row that stops early in a batch, a batch that fails (each request then gets its
own answer or error), sampling and n>1 kept alone, and close.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import numpy as np
import pytest
import torch

from vbench_async.backends.base import ImageInput, Request, SamplingParams, VideoInput
from vbench_async.errors import EngineDead, SampleError

GREEDY = SamplingParams(max_tokens=6)
FIELDS = ("token_ids", "text", "prompt_tokens", "output_tokens", "finish_reason")


def demo_requests(model_name: str, cache_dir, per_benchmark=(1,), sampling: SamplingParams = GREEDY) -> list[Request]:
    """Requests for demo-suite questions, with the frames a run would send (decoded into `cache_dir`): the samples
    `per_benchmark` of every demo benchmark (index 1: short videos; 0: long ones)."""
    from vbench_async import models
    from vbench_async.benchmarks import resolve_benchmarks
    from vbench_async.frames import FrameCache

    model = models.resolve(model_name)
    out = []
    with FrameCache(cache_dir, workers=1) as frames:
        for bench in resolve_benchmarks("demo", None):
            spec = bench.frame_spec(model)
            samples = bench.load_samples(None)
            for i in per_benchmark:
                sample = samples[i]
                v = frames.get_or_decode(bench.video_path(sample, None), spec, sample.window)
                video = VideoInput(v.frames, v.hf_metadata(), v.key)
                out.append(Request(sample.key, bench.render_prompt(sample), videos=(video,), sampling=sampling))
    return out


def fields(completion) -> tuple:
    return tuple(getattr(completion, f) for f in FIELDS)


async def _concurrently(backend, requests):
    return await asyncio.gather(*(backend.generate(r) for r in requests), return_exceptions=True)


@pytest.fixture(scope="module", params=["tiny-qwen2.5-vl", "tiny-qwen3-vl"])
def family(request, tmp_path_factory):
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    backend = HFBackend(str(ensure_tiny_model(request.param)), max_batch_size=16)
    backend._load()
    requests = demo_requests(request.param, tmp_path_factory.mktemp("frames"))
    requests.insert(3, Request("text", "Count to twenty: one two three", sampling=GREEDY))
    serial = [backend._generate(r) for r in requests]
    yield backend, requests, serial
    asyncio.run(backend.close())


def test_a_greedy_batch_answers_as_one_request_at_a_time(family):
    backend, requests, serial = family
    assert len({r.prompt_tokens for r in serial}) == len(serial)  # rows of different lengths: padding is exercised
    batched = backend._generate_batch(requests, [time.perf_counter()] * len(requests))
    assert [fields(c) for c in batched] == [fields(c) for c in serial]
    assert all(c.latency_s > 0 and c.texts is None for c in batched)
    if len({tuple(c.token_ids[0]) for c in serial}) == len(serial):
        return
    # Answers that repeat (the tiny Qwen2.5-VL answers every video prompt with token 0) prove less: the next-token
    # logits after each prompt, left-padded in one batch and alone, must agree too.
    with torch.inference_mode():
        together = backend.model(**backend.batch_inputs(requests), logits_to_keep=1).logits[:, -1]
        for i, r in enumerate(requests):
            alone = backend.model(**backend.inputs(r), logits_to_keep=1).logits[:, -1]
            torch.testing.assert_close(together[i:i + 1], alone, atol=1e-4, rtol=1e-4, msg=r.request_id)


def test_concurrent_generate_calls_are_batched_with_the_same_answers(family):
    backend, requests, serial = family
    backend.batch_sizes.clear()
    got = asyncio.run(_concurrently(backend, requests))
    assert [fields(c) for c in got] == [fields(c) for c in serial]
    assert sum(backend.batch_sizes) == len(requests) and max(backend.batch_sizes) > 1, backend.batch_sizes


def test_a_row_that_stops_early_is_cut_at_its_stop_token(family):
    """A stop token that the text prompt's answer reaches early and the other answers never produce: alone, generate
    stops there; in the batch the row goes on with padding until the others end. Both give the same cut row."""
    backend, requests, serial = family
    config = backend.model.generation_config
    saved = config.eos_token_id
    row, others = serial[3].token_ids[0], {t for i in (0, 1, 2, 4) for t in serial[i].token_ids[0]}
    cut = next((j for j in range(1, len(row) - 1) if row[j] not in others and row[j] not in row[:j]), None)
    if cut is None:
        pytest.skip("no token of the text answer is absent from the others")
    try:
        config.eos_token_id = [*(saved if isinstance(saved, list) else [saved]), row[cut]]
        alone = backend._generate(requests[3])
        batched = backend._generate_batch(requests[:5], [time.perf_counter()] * 5)
    finally:
        config.eos_token_id = saved
    assert alone.finish_reason == "stop" and alone.token_ids == [row[:cut + 1]] and alone.output_tokens == cut + 1
    assert [fields(c) for c in batched] == [fields(c) for c in (*serial[:3], alone, serial[4])]


def test_a_failing_batch_falls_back_to_one_request_at_a_time(family, monkeypatch):
    backend, requests, serial = family
    bad = Request("bad", requests[1].prompt, videos=requests[1].videos, sampling=GREEDY)  # batched with the others
    real = backend.batch_inputs

    def batch_inputs(reqs):
        if any(r.request_id == "bad" for r in reqs):
            raise ValueError("a request the processor refuses")
        return real(reqs)

    monkeypatch.setattr(backend, "batch_inputs", batch_inputs)
    backend.batch_sizes.clear()
    got = asyncio.run(_concurrently(backend, [requests[0], bad, requests[1]]))
    assert isinstance(got[1], SampleError) and "refuses" in str(got[1])
    assert [fields(got[0]), fields(got[2])] == [fields(serial[0]), fields(serial[1])]


def test_sampling_and_several_samples_run_alone(family):
    backend, requests, _ = family
    sampled = SamplingParams(temperature=0.8, max_tokens=6, seed=3)
    reqs = [Request(f"s{i}", "Count to twenty: one two three", sampling=sampled) for i in range(3)]
    reqs.append(Request("n2", "Which letter comes after A?", sampling=sampled, n=2))
    alone = [backend._generate(r) for r in reqs]
    backend.batch_sizes.clear()
    got = asyncio.run(_concurrently(backend, reqs))
    assert list(backend.batch_sizes) == [1, 1, 1, 1]
    assert [fields(c) for c in got] == [fields(c) for c in alone]  # each seeded as alone
    assert got[0].token_ids == got[1].token_ids  # same seed, same prompt: the same sample, whoever was in flight
    assert len(got[3].token_ids) == 2 and got[3].output_tokens == sum(len(r) for r in got[3].token_ids)


def test_requests_are_grouped_by_what_gives_equal_answers_and_by_length():
    from vbench_async.backends.hf import HFBackend, _Job

    text = "x" * 40  # about 10 tokens; the small video and image below add about one each
    video = VideoInput(np.zeros((2, 28, 28, 3), np.uint8), {}, "v")
    long_video = VideoInput(np.zeros((64, 56, 56, 3), np.uint8), {}, "w")  # about 128 tokens
    image = ImageInput(np.zeros((28, 28, 3), np.uint8), "i")
    jobs = deque(_Job(r) for r in (
        Request("v1", text, videos=(video,)), Request("i1", text, images=(image,)), Request("t1", text),
        Request("w1", text, videos=(long_video,)), Request("vi", text, videos=(video,), images=(image,)),
        Request("l1", text, sampling=SamplingParams(max_tokens=64)),
        Request("s1", text, sampling=SamplingParams(temperature=1.0)), Request("n2", text, n=2),
        Request("v2", text, videos=(video,)), Request("i2", text, images=(image,)),
        Request("w2", text, videos=(long_video,)), Request("v3", text, videos=(video,)),
    ))
    backend = HFBackend("unused", max_batch_size=3)
    batches = []
    while jobs:
        batches.append([j.request.request_id for j in backend._take(jobs)])
    assert batches == [["v1", "t1", "vi"], ["i1", "i2"], ["w1", "w2"], ["l1"], ["s1"], ["n2"], ["v2", "v3"]]
    with pytest.raises(ValueError):
        HFBackend("unused", max_batch_size=0)
    assert HFBackend("unused").batch_limit() == 8 and HFBackend("unused", device="cuda:0").batch_limit() == 32


def test_close_fails_what_waits_and_later_requests():
    from vbench_async.backends.hf import HFBackend

    backend = HFBackend("unused")
    backend.model = object()  # loaded, as far as `generate` can tell
    started, release = asyncio.Event(), None

    async def scenario():
        nonlocal release
        import threading

        release = threading.Event()

        def slow_generate(request, submitted=None):
            loop.call_soon_threadsafe(started.set)
            release.wait(10)
            raise EngineDead("closed meanwhile")

        backend._generate = slow_generate
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(backend.generate(Request("s", "x", sampling=SamplingParams(temperature=1.0))))
        await started.wait()
        second = asyncio.ensure_future(backend.generate(Request("t", "y", sampling=SamplingParams(temperature=1.0))))
        await asyncio.sleep(0.05)
        await backend.close()
        release.set()
        return await asyncio.gather(first, second, return_exceptions=True)

    first, second = asyncio.run(scenario())
    assert isinstance(first, EngineDead) and isinstance(second, EngineDead)
    with pytest.raises(EngineDead):
        asyncio.run(backend.generate(Request("u", "z")))
