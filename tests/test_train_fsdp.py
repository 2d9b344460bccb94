"""Acceptance on CPU (gloo, real torchrun), from one 2-rank training launch and one resumed launch.

Run A is 2 "nodes" (two torchrun launches with --nnodes 2 on 127.0.0.1, one rank each, each node with its own
node-local frame cache): Qwen3-VL (deepstack) with FSDP2 per-layer sharding and gradient checkpointing, one rank
holding video and the other text only; a corrupt video among the records, which every node drops at preparation and
reports (metrics, log, dropped_items.jsonl) while both steps train; a sharded checkpoint after each step (each rank
writes its own shard: torch.distributed.checkpoint, safetensors).

Run B (`vbench-async train --nproc-per-node 2`, which execs torchrun: one node, 2 ranks) is a fresh launch that
resumes from A's step-1 checkpoint and trains step 2 on another mesh: hybrid sharding with `fsdp.shard_size: 1`
(2 replicas x 1, the 2-D HSDP mesh), so it reads plain FSDP's shards into a replicated layout, syncs its rollout
engine through the bucketed gather of a 2-D mesh and saves from it; its weights, optimizer state, data order and
sampled completions must equal A's. Run C resumes the same checkpoint with runtime knobs changed (the micro-batch
size, the peer timeout): it logs them old -> new and ends within float rounding of A (resume by global step).
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
from conftest import free_port, launcher_env

from vbench_async.train.checkpoint import consolidate

REPO = Path(__file__).resolve().parents[1]
LAUNCH_TIMEOUT_S = 420  # a hang becomes a failure (the collectives themselves time out after fsdp.timeout_s)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Records video, corrupt video, text, video, text: once the corrupt one is dropped, with 2 prompts per step
    rank 0 gets video and rank 1 text only."""
    from vbench_async.demo.suite import generate_suite

    root = tmp_path_factory.mktemp("fsdp")
    generate_suite(root / "suite", n_videos=3, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    (root / "suite" / "videos" / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(4096))
    videos = [r for r in json.loads((root / "suite" / "annotations" / "mc.json").read_text()) if r.get("path")][:2]
    assert len(videos) == 2
    text = {"problem": "Which letter comes after A?", "problem_type": "multiple choice",
            "options": ["A. Z", "B. B", "C. Q", "D. X"], "solution": "<answer>B</answer>"}
    corrupt = {"problem_id": "corrupt", "problem": "What happens?", "problem_type": "multiple choice",
               "options": ["A. a", "B. b"], "solution": "<answer>A</answer>", "path": "corrupt.mp4"}
    records = []
    for i, video in enumerate(videos):
        records.append(video)
        if i == 0:
            records.append(corrupt)
        records.append({**text, "problem_id": f"text-{i}"})
    for rec in records:  # an offline response per record: every group holds a reward signal, so the loss is not 0
        rec["offline_response"] = rec["solution"]
    (root / "train.json").write_text(json.dumps(records))
    # The held-out set (validation): the two good videos' questions and the corrupt video's, through a card.
    (root / "val.json").write_text(json.dumps(videos + [corrupt]))
    (root / "val.yaml").write_text(yaml.safe_dump({"benchmarks": {"mvbench": {
        "annotation": str(root / "val.json"), "video_dir": str(root / "suite" / "videos")}}}))
    return root


def _config(data: Path, out: Path, **extra) -> Path:
    cfg = {
        "model": "tiny-qwen3-vl",
        "output_dir": str(out),
        "seed": 7,
        "data": {"records": str(data / "train.json"), "video_dir": str(data / "suite" / "videos"),
                 "cache_dir": str(data / "cache-node0"), "cache_scope": "node",
                 "frames": {"max_frames": 4, "max_pixels": 4096}, "shuffle": False, "decode_workers": 1},
        "rollout": {"n": 4, "max_tokens": 4, "offline_per_group": 1},
        "algorithm": {"name": "dapo", "dynamic_sampling": False},
        "train": {"steps": 2, "prompts_per_step": 2, "micro_batch_size": 3, "lr": 1e-3,
                  "gradient_checkpointing": True},
        "fsdp": {"shard": "layer", "timeout_s": 90},
        "checkpoint": {"every": 1, "keep": 5, "export": False},
        "logging": {"progress": False, "log_samples": 4},
    }
    for key, value in extra.items():
        section, name = key.split("__")
        cfg.setdefault(section, {})[name] = value
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path




def _two_nodes(config: Path, data: Path) -> list[str]:
    """Two torchrun launches with --nnodes 2 (one rank each), node-local caches; returns their logs."""
    port = free_port()
    nodes = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node),
               "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port),
               "-m", "vbench_async.train", "--config", str(config),
               "--set", f"data.cache_dir={data / f'cache-node{node}'}"]
        nodes.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=launcher_env(), cwd=REPO))
    logs = []
    try:
        for proc in nodes:
            try:
                stdout, stderr = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"a node hung for {LAUNCH_TIMEOUT_S} s")
            logs.append(stderr)
            assert proc.returncode == 0, f"{stdout[-2000:]}\n{stderr[-6000:]}"
    finally:
        for proc in nodes:
            if proc.poll() is None:
                proc.kill()
    return logs


def _resume_launch(config: Path) -> subprocess.CompletedProcess:
    """`vbench-async train --nproc-per-node 2` (it execs torchrun --standalone)."""
    cmd = [sys.executable, "-m", "vbench_async", "train", "--nproc-per-node", "2", "--config", str(config)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=launcher_env(),
                              cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun hung for {LAUNCH_TIMEOUT_S} s: {str(exc.stderr)[-3000:]}")
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    return proc


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


# Validation at step 2 on both ranks' rollout engines. total_pixels is the training's (records mode has no card
# preset), so the held-out videos' frames are the training's cache entries, not new ones.
VALIDATION = {"every": 2, "run": {
    "selection": {"benchmarks": ["mvbench"]}, "sampling": {"max_tokens": 4}, "decode_workers": 1,
    "frame_overrides": {"max_frames": 4, "max_pixels": 4096, "total_pixels": 117964800}}}


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("runs") / "a"
    run = {**VALIDATION["run"], "selection": {"benchmarks": ["mvbench"], "data_root": str(data / "val.yaml")}}
    return out, _two_nodes(_config(data, out, validation__every=2, validation__run=run), data)


def test_two_nodes_drop_a_corrupt_video_and_train_mixed_video_and_text(uninterrupted, data):
    out, logs = uninterrupted
    rows = _metrics(out)
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["loss"] is not None and r["grad_norm"] is not None and r["grad_norm"] > 0  # finite, real gradients
        assert r["rollout/groups"] == 2 and r["rollout/offline_groups"] == 2 and r["data/dropped_items"] == 1
    # Step 2 syncs the HF rollout copy (fp32 on CPU) through the bucketed gather: a few all-gathers, not one a tensor.
    sync = rows[1]
    print("sync at step 2 (rank 0):", {k: v for k, v in sync.items() if k.startswith("sync/")})
    assert sync["sync/bytes"] > 0 and 0 < sync["sync/collectives"] < sync["sync/tensors"] / 10
    assert sync["sync/bytes"] / 2 <= sync["sync/received_bytes"] < sync["sync/bytes"]  # the other rank's half
    dropped = [json.loads(line) for line in (out / "dropped_items.jsonl").read_text().splitlines()]
    assert [d["sample"] for d in dropped] == ["train/corrupt"] and dropped[0]["reason"].startswith("decode_error")
    assert all("dropped 1 item(s) whose frames cannot be cached: train/corrupt" in log for log in logs)
    good = {r["path"] for r in json.loads((data / "train.json").read_text())
            if r.get("path") not in (None, "corrupt.mp4")}
    for node in (0, 1):  # node-local caches: each node decoded every good video, and recorded the corrupt one
        cache = data / f"cache-node{node}"
        assert len(list(cache.rglob("entries/*/*.safetensors"))) == len(good)
        assert len(list(cache.rglob("failures/*.json"))) == 1
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {s["modality"] for s in samples} == {"video"}  # rank 0 logs its group: the video prompt
    assert all(s["sample"] != "train/corrupt" for s in samples)
    assert any(s["offline"] for s in samples) and any(not s["offline"] for s in samples)


def test_validation_runs_on_both_ranks_and_keeps_the_failed_sample(uninterrupted, data):
    """Each rank evaluated its own share (disjoint, non-empty) on its own rollout engine; the last shard merged them
    into one run directory holding every sample, the corrupt video's as a failure; val/* are the merged scores."""
    out, _ = uninterrupted
    rows = {r["step"]: r for r in _metrics(out)}
    assert not any(k.startswith("val/") for k in rows[1])
    assert 0.0 <= rows[2]["val/mvbench"] <= 1.0
    assert (rows[2]["val/samples"], rows[2]["val/failed"]) == (3.0, 1.0)  # the failed one is in the denominator
    where = out / "validation" / "step-000002"
    assert not (where / "model").exists()  # nothing exported for validation
    index = json.loads(next((where / "results").glob("mvbench.*.shards-2.json")).read_text())
    owners = dict(zip(index["sample_ids"], index["shards"]))
    assert sorted(owners) == ["corrupt", *sorted(r["problem_id"] for r in json.loads((data / "val.json").read_text())
                                                 if r["problem_id"] != "corrupt")]
    shares = {}
    for rank in (0, 1):  # each rank's own result lines, written as it evaluated its share on its engine
        shard_file = next((where / "results").glob(f"mvbench.*.shard-{rank}-of-2.jsonl"))
        shares[rank] = {json.loads(line)["sample_id"] for line in shard_file.read_text().splitlines()}
        manifest = json.loads((where / f"manifest.shard-{rank}-of-2.json").read_text())
        assert manifest["backend"]["weights"] == "step 2" and manifest["backend"]["backend"] == "hf"
    assert shares[0] and shares[1] and not shares[0] & shares[1] and shares[0] | shares[1] == set(owners)
    assert shares == {r: {i for i, o in owners.items() if o == r} for r in (0, 1)}  # the pinned split
    summary = json.loads((where / "summary.json").read_text())
    assert summary["merged"]["shards"] and summary["benchmarks"]["mvbench"]["n_total"] == 3
    lines = [json.loads(line) for line in (where / summary["benchmarks"]["mvbench"]["results_file"]).read_text()
             .splitlines()]
    assert sorted(r["sample_id"] for r in lines) == sorted(owners)  # every sample, once
    assert [r["sample_id"] for r in lines if r.get("error")] == ["corrupt"]


def _shards(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor of every rank's shard file, by (file, name): what a resume reads."""
    from safetensors.torch import load_file

    return {f"{f.name}:{k}": v for f in sorted(checkpoint.glob("*.safetensors")) for k, v in load_file(f).items()}


def test_checkpoints_are_sharded_per_rank_and_kept_by_count(uninterrupted, tmp_path):
    out, _ = uninterrupted
    dirs = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert dirs == ["step-000001", "step-000002"]  # keep: 5
    last = out / "checkpoints" / "step-000002"
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
    a_out, _ = uninterrupted
    first = a_out / "checkpoints" / "step-000001"
    out = tmp_path_factory.mktemp("runs") / "b"
    # 2 ranks on one node now (the resume plans each rank's reads from the file headers); node 0's cache.
    proc = _resume_launch(_config(data, out, checkpoint__resume=str(first), fsdp__shard_size=1))
    assert re.search(r"resumed from \S*step-000001 at step 1", proc.stderr), proc.stderr[-3000:]  # says it resumed
    assert "hybrid sharding: 2 replicas x 1 ranks" in proc.stderr
    resumed = _metrics(out)
    assert [r["step"] for r in resumed] == [2]
    assert resumed[0]["data/dropped_items"] == 1  # the cache remembers the corrupt video: dropped again, not decoded
    a_rows = {r["step"]: r for r in _metrics(a_out)}
    for r in resumed:  # 2 x 1: the sync gathers nothing (each rank holds the whole model), and hands over the same
        assert r["sync/collectives"] == 0 and r["sync/bytes"] == a_rows[r["step"]]["sync/bytes"]
        assert r["data/consumed"] == a_rows[r["step"]]["data/consumed"]
        assert r["reward/mean"] == a_rows[r["step"]]["reward/mean"]
    a_text = [s["text"] for s in map(json.loads, (a_out / "samples.jsonl").read_text().splitlines())
              if s["step"] > 1]
    b_text = [s["text"] for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())]
    assert a_text == b_text  # the same prompts, sampled with the same seeds, from the same weights
    # Whole tensors (the two meshes split them into files differently): weights and Adam state.
    a = consolidate(a_out / "checkpoints" / "step-000002", "")
    b = consolidate(out / "checkpoints" / "step-000002", "")
    start = consolidate(first, "")
    assert a.keys() == b.keys() == start.keys()
    weights = [k for k in a if k.startswith("model/")]
    assert weights and len(weights) < len(a)
    moved = max((a[k] - start[k]).abs().max().item() for k in weights)
    assert moved > 0  # step 2 changed the weights ...
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)  # weights and Adam state
    assert worst <= 1e-6, f"resumed state differs from the uninterrupted run by {worst}"  # ... identically


def test_resume_with_another_micro_batch_size_continues_and_logs_the_change(uninterrupted, data, tmp_path_factory):
    """Resume by global step: a runtime knob (here the micro-batch size, as after an out-of-memory, and the peer
    timeout) may change; the resume says old -> new and step 2 trains the same update, summed in other micro-batches
    (so equal to the uninterrupted run's up to float rounding)."""
    a_out, _ = uninterrupted
    first = a_out / "checkpoints" / "step-000001"
    out = tmp_path_factory.mktemp("runs") / "c"
    proc = _resume_launch(_config(data, out, checkpoint__resume=str(first), train__micro_batch_size=1,
                                  fsdp__peer_timeout_s=30.0))
    assert re.search(r"resumed from \S*step-000001 at step 1", proc.stderr), proc.stderr[-3000:]
    changed = next(line for line in proc.stderr.splitlines() if "changed since the checkpoint (old -> new)" in line)
    assert "train.micro_batch_size: 3 -> 1" in changed and "fsdp.peer_timeout_s: 45.0 -> 30.0" in changed
    rows = _metrics(out)
    assert [r["step"] for r in rows] == [2] and rows[0]["grad_norm"] > 0
    a_row = {r["step"]: r for r in _metrics(a_out)}[2]
    assert rows[0]["data/consumed"] == a_row["data/consumed"] and rows[0]["reward/mean"] == a_row["reward/mean"]
    a = consolidate(a_out / "checkpoints" / "step-000002", "")
    c = consolidate(out / "checkpoints" / "step-000002", "")
    start = consolidate(first, "")
    assert a.keys() == c.keys()
    weights = [k for k in a if k.startswith("model/")]
    moved = max((a[k] - start[k]).abs().max().item() for k in weights)
    worst = max((a[k] - c[k]).abs().max().item() for k in weights)
    print(f"micro-batch size 3 -> 1 on resume: step 2 moved the weights by up to {moved:.2e}; they differ from the "
          f"uninterrupted run's by up to {worst:.2e}")
    assert worst <= 1e-5 < moved
