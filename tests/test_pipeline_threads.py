"""The event loop only schedules: result lines are fsynced by the writer thread (and count only after), scoring runs
off the loop, and the OpenAI backend encodes a video once per group of questions, in the loader, sending its uuid.

Real parts throughout: a real H.264 clip decoded into a real frame cache, the real OpenAI backend over HTTP to a
server on 127.0.0.1 (tests/support/fault_server.py), real result files.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import httpx
from support.fault_server import FaultServer
from support.hostile import _video


def _cached(tmp_path: Path):
    """A real clip, decoded once into a real frame cache (the decode worker's job, in this process)."""
    from vbench_async.benchmarks import get_benchmark
    from vbench_async.frames import FrameCache
    from vbench_async.frames.worker import handle
    from vbench_async.models import family_ref

    video = _video(tmp_path / "videos" / "clip.mp4")
    spec = get_benchmark("mmvu").frame_spec(family_ref("qwen2.5-vl"), {"max_frames": 4, "max_pixels": 16384})
    cache = FrameCache(tmp_path / "cache")
    key = cache.key(video, spec)
    reply = handle({"id": key, "video": str(video), "fingerprint": cache.fingerprint(video), "spec": spec.to_dict(),
                    "window": None, "decoder": cache.decoder,
                    "codec": cache.codec, "out": str(cache.layout.entry_path(key))})
    assert reply["ok"], reply
    return cache, video, spec


def _run(tmp_path: Path, backend, cache, video, spec, n: int, score=None, ready_at_loaded: int | None = None):
    """Evaluate `n` questions on the clip. `ready_at_loaded`: the backend's start is held open (as an engine's is while
    it starts) until the loaders have loaded that many samples, or 15 s, and 0.3 s more."""
    from vbench_async.backends.base import SamplingParams
    from vbench_async.benchmarks import get_benchmark, score_sample
    from vbench_async.evaluation.pipeline import Pipeline, PlanEntry, group_by_video
    from vbench_async.results.result_file import ResultStore
    from vbench_async.samples import Sample

    bench = get_benchmark("mmvu")
    store = ResultStore(tmp_path / "run", "mmvu", "cfg")
    samples = [Sample(benchmark="mmvu", sample_id=f"q{i}", task_type="multiple choice", question=f"[{i}] Colour?",
                      options=["A. red", "B. green"], answer="A", video="clip.mp4") for i in range(n)]
    entries = [PlanEntry(s, bench.render_prompt(s), store, video=video, spec=spec) for s in samples]
    pipeline = Pipeline(backend, cache.get_or_decode, lambda p: None, score or score_sample, SamplingParams(),
                        concurrency=8)

    async def starting() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while pipeline._loaded < (ready_at_loaded or 0) and loop.time() < deadline:  # the loaders' own count
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # time to load past the bound, were anything to let them
        await backend.start()

    async def main():
        ready = asyncio.ensure_future(starting()) if ready_at_loaded else None
        if ready is None:
            await backend.start()
        try:
            return await pipeline.run(group_by_video(entries), ready=ready)
        finally:
            await backend.close()

    with store:
        stats = asyncio.run(main())
    lines = [json.loads(line) for line in store.path.read_text().splitlines()]
    return stats, lines


def test_openai_backend_encodes_a_video_once_per_group_and_sends_its_uuid(tmp_path, monkeypatch):
    from vbench_async.backends import openai

    cache, video, spec = _cached(tmp_path)
    encoded: list[str] = []  # the thread of every frame encoding
    real = openai._png_b64
    monkeypatch.setattr(openai, "_png_b64", lambda a: encoded.append(threading.current_thread().name) or real(a))
    bodies: list[dict] = []
    real_post = httpx.AsyncClient.post

    async def post(self, url, *, json=None, **kw):  # note each body on its way to the wire
        bodies.append(json)
        return await real_post(self, url, json=json, **kw)

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    with FaultServer() as server:
        stats, lines = _run(tmp_path, openai.OpenAIBackend("m", server.url, max_retries=0), cache, video, spec, n=5)
    frames = cache.get(video, spec).frames
    assert stats.n_done == 5 and stats.n_failed == 0 and len(lines) == 5
    assert len(encoded) == len(frames), f"{len(encoded)} frame encodings for {len(frames)} frames and 5 questions"
    assert all(name.startswith("frames") for name in encoded), encoded  # in the loader, not on the event loop
    parts = [b["messages"][0]["content"][0] for b in bodies]
    assert len(parts) == 5 and all(p["type"] == "video_url" and p["uuid"] == cache.key(video, spec) for p in parts)
    assert len({p["video_url"]["url"] for p in parts}) == 1


def test_result_lines_are_fsynced_off_the_loop_and_scored_off_it(tmp_path, monkeypatch):
    from vbench_async.backends import openai
    from vbench_async.benchmarks import score_sample

    cache, video, spec = _cached(tmp_path)
    fsyncs: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(threading.current_thread().name) or real_fsync(fd))
    scored: list[str] = []

    def score(sample, text):
        scored.append(threading.current_thread().name)
        return score_sample(sample, text)

    with FaultServer() as server:
        stats, lines = _run(tmp_path, openai.OpenAIBackend("m", server.url, max_retries=0), cache, video, spec, n=24,
                            score=score)
    assert stats.n_done == 24 and sorted(r["sample_id"] for r in lines) == sorted(f"q{i}" for i in range(24))
    assert all(r["score"] == 1.0 for r in lines)
    assert fsyncs and set(fsyncs) == {"results"}, set(fsyncs)
    assert len(fsyncs) <= 24 and stats.lines_per_fsync >= 1.0
    assert scored and all(name.startswith("score") for name in scored), set(scored)


def test_while_the_engine_starts_every_request_slot_and_the_queue_are_loaded(tmp_path):
    """While the backend starts, each worker holds one loaded sample and the queue fills behind them: when it is ready,
    `concurrency` + `queue_size` samples are loaded (not only the queue's), and no more; then every one is answered."""
    from vbench_async.backends import openai
    from vbench_async.evaluation.pipeline import QUEUE_SIZE

    cache, video, spec = _cached(tmp_path)
    bound = 8 + QUEUE_SIZE  # _run's concurrency, and the queue
    with FaultServer() as server:
        stats, lines = _run(tmp_path, openai.OpenAIBackend("m", server.url, max_retries=0), cache, video, spec,
                            n=bound + 20, ready_at_loaded=bound)
    assert stats.queued_at_ready == bound
    assert stats.n_done == bound + 20 and stats.n_failed == 0 and len(lines) == bound + 20
