"""Training validation in one process: the ordinary evaluation run on the trainer's own rollout engine (HFRollout
on the tiny model, no child process, no export), a corrupt video in the held-out set. The 2-rank case (each rank its
own share, merged into one run directory) is in tests/test_train_fsdp.py, on its shared launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from support.held_out import validate_on

from vbench_async.errors import UserError
from vbench_async.train.config import load_config


def test_a_failed_sample_is_recorded_and_the_scores_stand(tmp_path: Path) -> None:
    from vbench_async.demo.tiny_models import ensure_tiny_model
    from vbench_async.train.rollout import HFRollout

    model_dir = str(ensure_tiny_model("tiny-qwen2.5-vl"))
    engine = HFRollout(model_dir, torch.device("cpu"))
    try:
        where = validate_on(engine, model_dir, tmp_path)
    finally:
        engine.close()
    manifest = json.loads((where / "manifest.json").read_text())
    assert manifest["run_config"]["frame_overrides"] == {"max_frames": 4, "max_pixels": 3136}
    assert manifest["backend"]["name"] == "hf" and manifest["backend"]["weights"] == "step 3"
    assert len(list((tmp_path / "cache").rglob("entries/*/*.safetensors"))) == 2  # in the training's frame cache


@pytest.mark.parametrize("run, message", [
    ({"model": "m"}, "validation.run: model cannot be set here"),
    ({"backend": "vllm"}, "validation.run: backend cannot be set here"),
    ({"sampling": {"max_tokenz": 4}}, r"unknown field\(s\) sampling.max_tokenz"),
    ({"concurrency": 0}, "concurrency must be at least 1"),
    ({"sampling": {"max_tokens": 4}}, "name validation.run.selection.benchmarks"),
])
def test_a_wrong_validation_run_is_refused_when_the_config_is_read(tmp_path: Path, run, message) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"data": {"records": "r.json"}, "validation": {"every": 2, "run": run}}))
    with pytest.raises(UserError, match=message):
        load_config(config)
