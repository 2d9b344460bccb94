"""Acceptance on CPU (gloo): `torchrun --nproc_per_node 2` with FSDP2 per-layer sharding, one rank holding video
and the other text only, Qwen3-VL (deepstack) with gradient checkpointing; then stop-and-resume equals an
uninterrupted run.

Run A (`torchrun ... -m vbench_async.train`) trains 3 steps and checkpoints after each, sharded: each rank writes
its own shard (torch.distributed.checkpoint, safetensors). Run B (`vbench-async train --nproc-per-node 2`, which
execs torchrun) is a fresh launch that resumes from A's step-1 checkpoint (each rank reading its shard) and trains to
step 3; its weights, optimizer state, data order and sampled completions must equal A's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from vbench_async.train.checkpoint import consolidate

REPO = Path(__file__).resolve().parents[1]
LAUNCH_TIMEOUT_S = 420  # a hang becomes a failure (the collectives themselves time out after fsdp.timeout_s)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Records alternating video / text-only, so with 2 prompts per step rank 0 gets video and rank 1 text."""
    from vbench_async.demo.suite import generate_suite

    root = tmp_path_factory.mktemp("fsdp")
    generate_suite(root / "suite", n_videos=3, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    videos = [r for r in json.loads((root / "suite" / "annotations" / "mc.json").read_text()) if r.get("path")]
    text = {"problem": "Which letter comes after A?", "problem_type": "multiple choice",
            "options": ["A. Z", "B. B", "C. Q", "D. X"], "solution": "<answer>B</answer>"}
    records = []
    for i, video in enumerate(videos[:2]):
        # An offline response per record: every group then holds a reward signal, so the loss is not trivially 0.
        records.append({**video, "offline_response": video["solution"]})
        records.append({**text, "problem_id": f"text-{i}", "offline_response": "<answer>B</answer>"})
    (root / "train.json").write_text(json.dumps(records))
    return root


def _config(data: Path, out: Path, **extra) -> Path:
    cfg = {
        "model": "tiny-qwen3-vl",
        "output_dir": str(out),
        "seed": 7,
        "data": {"records": str(data / "train.json"), "video_dir": str(data / "suite" / "videos"),
                 "cache_dir": str(data / "cache"), "frames": {"max_frames": 4, "max_pixels": 4096},
                 "shuffle": False, "decode_workers": 1},
        "rollout": {"n": 4, "max_tokens": 4, "offline_per_group": 1},
        "algorithm": {"name": "dapo", "dynamic_sampling": False},
        "train": {"steps": 3, "prompts_per_step": 2, "micro_batch_size": 3, "lr": 1e-3,
                  "gradient_checkpointing": True},
        "fsdp": {"shard": "layer", "timeout_s": 90},
        "checkpoint": {"every": 1, "keep": 5, "export": False},
        "logging": {"progress": False, "log_samples": 4},
    }
    for key, value in extra.items():
        section, name = key.split("__")
        cfg[section][name] = value
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def _torchrun(config: Path, wrapper: bool = False) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 -m vbench_async.train`, or the same through `vbench-async train`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    if wrapper:
        cmd = [sys.executable, "-m", "vbench_async", "train", "--nproc-per-node", "2", "--config", str(config)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "vbench_async.train", "--config", str(config)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun hung for {LAUNCH_TIMEOUT_S} s: {str(exc.stderr)[-3000:]}")
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    return proc


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "a"
    _torchrun(_config(data, out))
    return out


def test_two_ranks_mixed_video_and_text_train_without_hang_or_crash(uninterrupted):
    rows = _metrics(uninterrupted)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["loss"] is not None and r["grad_norm"] is not None and r["grad_norm"] > 0  # finite, real gradients
        assert r["rollout/groups"] == 2 and r["rollout/offline_groups"] == 2
    samples = [json.loads(line) for line in (uninterrupted / "samples.jsonl").read_text().splitlines()]
    assert {s["modality"] for s in samples} == {"video"}  # rank 0 logs its group: the video prompt
    assert any(s["offline"] for s in samples) and any(not s["offline"] for s in samples)


def _shards(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor of every rank's shard file, by (file, name): what a resume reads."""
    from safetensors.torch import load_file

    return {f"{f.name}:{k}": v for f in sorted(checkpoint.glob("*.safetensors")) for k, v in load_file(f).items()}


def test_checkpoints_are_sharded_per_rank_and_kept_by_count(uninterrupted, tmp_path):
    dirs = sorted(p.name for p in (uninterrupted / "checkpoints").iterdir())
    assert dirs == ["step-000001", "step-000002", "step-000003"]  # keep: 5
    last = uninterrupted / "checkpoints" / "step-000003"
    files = sorted(p.name for p in last.glob("*.safetensors"))
    assert files == ["shard-00001-model-00001-of-00001.safetensors", "shard-00002-model-00001-of-00001.safetensors"]
    shards = _shards(last)
    weights = [k for k in shards if ":model/" in k]
    optim = [k for k in shards if ":optim/" in k]
    assert weights and optim
    full = consolidate(last)
    sizes = {name: t.numel() for name, t in full.items()}
    rank1 = {k.split(":model/")[1] for k in weights if k.startswith("shard-00002")}
    assert rank1 and all(shards[f"shard-00002-model-00001-of-00001.safetensors:model/{n}"].numel() < sizes[n]
                         for n in rank1 if sizes[n] > 1)  # a rank holds part of each tensor, not all of it
    # An export on demand, from the sharded files alone, in one process.
    proc = subprocess.run([sys.executable, "-m", "vbench_async.train", "--export", str(last), "--to",
                           str(tmp_path / "hf")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from vbench_async.models import resolve

    assert resolve(str(tmp_path / "hf")).family == "qwen3-vl"


def test_resume_after_step_1_reaches_the_same_weights(uninterrupted, data, tmp_path_factory):
    first = uninterrupted / "checkpoints" / "step-000001"
    out = tmp_path_factory.mktemp("runs") / "b"
    proc = _torchrun(_config(data, out, checkpoint__resume=str(first)), wrapper=True)  # also `vbench-async train`
    assert re.search(r"resumed from \S*step-000001 at step 1", proc.stderr), proc.stderr[-3000:]  # says it resumed
    resumed = _metrics(out)
    assert [r["step"] for r in resumed] == [2, 3]
    a_rows = {r["step"]: r for r in _metrics(uninterrupted)}
    for r in resumed:
        assert r["data/consumed"] == a_rows[r["step"]]["data/consumed"]
        assert r["reward/mean"] == a_rows[r["step"]]["reward/mean"]
    a_text = [s["text"] for s in map(json.loads, (uninterrupted / "samples.jsonl").read_text().splitlines())
              if s["step"] > 1]
    b_text = [s["text"] for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())]
    assert a_text == b_text  # the same prompts, sampled with the same seeds, from the same weights
    a = _shards(uninterrupted / "checkpoints" / "step-000003")
    b = _shards(out / "checkpoints" / "step-000003")
    start = _shards(first)
    assert a.keys() == b.keys() == start.keys()
    weights = [k for k in a if ":model/" in k]
    moved = max((a[k] - start[k]).abs().max().item() for k in weights)
    assert moved > 0  # steps 2-3 changed the weights ...
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)  # weights and Adam state
    assert worst <= 1e-6, f"resumed state differs from the uninterrupted run by {worst}"  # ... identically
