"""Memory for long video contexts: the training state in host memory during rollouts (`fsdp.offload_rollout`,
train/offload.py) and no second full copy of the weights on rank 0's device while loading (train/fsdp.py).

The offload is checked on two real ranks (torchrun, gloo; tests/support/memory_worker.py): the storage is really
freed and the bytes come back, and the training is bit for bit the one without offload. Its cost is in
perf/offload.py; the memory it frees at 8 B on 8 x H200 in docs/training.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import launcher_env

from vbench_async.train.fsdp import DistInfo, source_state

REPO = Path(__file__).resolve().parents[1]


def test_rank_0_broadcasts_from_the_loaded_model_itself_not_from_a_device_copy():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    rank0 = source_state(model, DistInfo(0, 2, 0, torch.device("cpu")))
    own = model.state_dict()
    assert rank0.keys() == own.keys()
    assert all(rank0[k].data_ptr() == own[k].data_ptr() for k in own)  # the same memory: nothing copied
    assert source_state(None, DistInfo(1, 2, 1, torch.device("cpu"))) == {}


def test_offload_frees_the_training_state_and_the_next_steps_are_bit_identical(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(REPO / "tests" / "support" / "memory_worker.py"), str(tmp_path / "figures")],
                          capture_output=True, text=True, timeout=240, cwd=REPO, env=launcher_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    for rank in (0, 1):
        figures = json.loads((tmp_path / f"figures.{rank}").read_text())
        assert figures["loaded"]  # every rank's shards hold rank 0's weights (sent from host memory)
        assert figures["freed"] and figures["restored"]  # nothing left on the device, then the same bytes
        assert figures["same_training"] and figures["moved"] > 1e-3  # the steps trained, identically
        assert figures["bytes"] >= 4 * 3 * figures["param_bytes"]  # 4 offloads of weights + 2 Adam moments


def test_offload_is_a_runtime_knob_off_by_default(tmp_path):
    from vbench_async.train.config import load_config
    from vbench_async.train.resume_identity import resume_changes

    path = tmp_path / "cfg.yaml"
    path.write_text("data: {records: r.json}\n")
    saved = load_config(path)
    assert saved.fsdp.offload_rollout is False
    older = saved.to_dict()
    del older["fsdp"]["offload_rollout"]  # a checkpoint from before the option resumes with it on
    on = load_config(path, ["fsdp.offload_rollout=true"])
    assert resume_changes(on, {"config": older}, "ckpt") == ["fsdp.offload_rollout: '<unset>' -> True"]


@pytest.mark.slow  # two 2-step trainings of the tiny model (~1 min on 2 cores)
def test_a_training_with_offload_during_rollouts_is_the_training_without(tmp_path):
    """The trainer's own use: the state leaves before each rollout and comes back before the update, and the run
    samples, scores and trains exactly as without (text-only records, so only the offload differs)."""
    answers = [f"<answer>{'ABCD'[i % 4]}</answer>" for i in range(4)]
    records = [{"problem_id": f"q{i}", "problem": f"Which letter is number {i % 4 + 1} of A, B, C, D?",
                "problem_type": "multiple choice", "options": ["A. A", "B. B", "C. C", "D. D"],
                "solution": answer, "offline_response": answer} for i, answer in enumerate(answers)]
    (tmp_path / "train.json").write_text(json.dumps(records))
    metrics = {}
    for offload in (False, True):
        out = tmp_path / f"offload-{offload}"
        cfg = {"model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 3,
               "data": {"records": str(tmp_path / "train.json"), "cache_dir": str(tmp_path / "cache")},
               "rollout": {"n": 3, "max_tokens": 4, "offline_per_group": 1},
               "train": {"steps": 2, "prompts_per_step": 2, "lr": 1e-2}, "fsdp": {"offload_rollout": offload},
               "checkpoint": {"export": False}, "logging": {"progress": False}}
        path = tmp_path / f"{offload}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = subprocess.run([sys.executable, "-m", "vbench_async.train", "--config", str(path)], capture_output=True,
                              text=True, timeout=600, cwd=REPO, env=launcher_env())
        assert proc.returncode == 0, proc.stderr[-4000:]
        metrics[offload] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for plain, moved in zip(metrics[False], metrics[True]):
        assert moved["offload/bytes"] > 0 and "offload/bytes" not in plain
        assert {k: plain[k] for k in ("loss", "grad_norm", "reward/mean")} == \
            {k: moved[k] for k in ("loss", "grad_norm", "reward/mean")}
