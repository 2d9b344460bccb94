"""A cold cache does not hold the engine back: the evaluation loop starts once the engine is ready, while the videos
behind the first are still being decoded, and each video is decoded once (the loop's loaders share a decode in
flight, and the decoding thread finds the entries the loaders made).

Real parts: real H.264 clips, the real decode workers and frame cache, the real OpenAI backend over HTTP to a server
on 127.0.0.1 (tests/support/fault_server.py) that answers at once, so the engine is ready before the first decode
ends.
"""

from __future__ import annotations

import json

from conftest import run_cli
from support.fault_server import ANSWER, FaultServer, openai_args
from support.hostile import _good, _video, write_data_map

VIDEOS = 6


def test_the_loop_starts_before_the_cold_cache_is_filled_and_decodes_each_video_once(tmp_path):
    data = tmp_path / "data"
    for i in range(VIDEOS):  # long enough that one decode pass takes a noticeable part of a second
        _video(data / "videos" / f"v{i}.mp4", frames=240, fps=24, width=160, height=96, textured=True, seed=i)
    records = [_good(f"q{i}-{j}", path=f"v{i}.mp4", problem=f"[{i}.{j}] Which colour is the square?")
               for i in range(VIDEOS) for j in range(2)]
    (data / "cold.json").write_text(json.dumps(records))
    data_map = write_data_map(data, "cold.json")
    out, cache = tmp_path / "out", tmp_path / "cache"
    with FaultServer(ANSWER) as server:  # one decode worker: the videos are decoded one after another
        proc = run_cli(*openai_args(data_map, out, cache, server.url, "--workers", "1"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    throughput = json.loads((out / "manifest.json").read_text())["throughput"]
    assert throughput["mode"] == "both"
    decoded = throughput["preprocess"]
    # The first answer was asked for while the decoding thread still had videos to go, not after the last.
    assert throughput["time_to_first_request_s"] < decoded["seconds"], throughput
    # Every video has one entry, made once: by the decoding thread, or by a loader first ("reused" by the thread).
    assert decoded["unique"] == VIDEOS and decoded["cached"] + decoded["reused"] == VIDEOS and decoded["failed"] == 0
    assert len(list(cache.rglob("*.safetensors"))) == VIDEOS
    assert throughput["loop"]["samples"] == 2 * VIDEOS and throughput["loop"]["failed"] == 0
