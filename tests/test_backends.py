"""The openai backend against vLLM's real OpenAI-compatible server on 127.0.0.1, and the transformers backend.

Both must see exactly the frames and metadata the in-process engine sees: the prompt token counts (video tokens and
Qwen3-VL timestamps included) must equal those of the in-process vLLM run on the same samples.
"""

from __future__ import annotations

import pytest
from conftest import ENGINE_GROUP, outputs, run_cli, served_args

pytestmark = [pytest.mark.vllm, ENGINE_GROUP]


def test_openai_backend_matches_in_process_engine(vllm_server, qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    proc = run_cli("run", *served_args(vllm_server), "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc,demo-tg",
                   "--max-tokens", "12", "--no-progress", "--output-dir", str(tmp_path / "srv"),
                   "--cache-dir", str(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    served = outputs(tmp_path / "srv", "prompt_tokens")
    local = outputs(tmp / "a", "prompt_tokens")
    assert served and all(served[k] == local[k] for k in served), (served, local)
    # Same engine, same frames, greedy: the same text.
    assert outputs(tmp_path / "srv") == {k: v for k, v in outputs(tmp / "a").items() if k in served}


def test_hf_backend_sees_the_same_tokens(qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    proc = run_cli("run", "--backend", "hf", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc,demo-stvg",
                   "--max-samples", "3", "--max-tokens", "6", "--no-progress", "--output-dir", str(tmp_path / "hf"),
                   "--cache-dir", str(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    hf = outputs(tmp_path / "hf", "prompt_tokens")
    local = outputs(tmp / "a", "prompt_tokens")
    assert len(hf) == 6
    assert all(hf[k] == local[k] for k in hf), (hf, local)


def test_openai_video_part_carries_the_source_metadata():
    """The request the openai backend sends: every cached frame, the source fps and indices; a 1-frame source padded
    to the temporal patch is announced with as many frames as are sent (vLLM's server refuses fewer)."""
    import numpy as np

    from vbench_async.backends.openai import video_part

    frames = np.zeros((2, 28, 28, 3), np.uint8)
    meta = {"fps": 25.0, "frames_indices": [0, 0], "total_num_frames": 1, "duration": 0.04}
    part, io_kwargs = video_part(frames, meta)
    assert part["type"] == "video_url" and part["video_url"]["url"].count(",") == 2  # prefix + 2 frames
    assert io_kwargs == {"num_frames": -1, "fps": 25.0, "frames_indices": [0, 0], "total_num_frames": 2,
                         "duration": 0.04}
    assert video_part(frames, {**meta, "total_num_frames": 300})[1]["total_num_frames"] == 300
