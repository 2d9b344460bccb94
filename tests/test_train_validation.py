"""Training validation in one process: the ordinary evaluation run on the trainer's own rollout engine (HFRollout
on the tiny model, no child process, no export), a corrupt video in the held-out set. The 2-rank case (each rank its
own share, merged into one run directory) is in tests/test_train_fsdp.py, on its shared launch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from vbench_async.errors import UserError
from vbench_async.train.config import load_config
from vbench_async.train.fsdp import DistInfo


def held_out(root: Path) -> Path:
    """A data map for mvbench: one question on each of two good videos, one on a corrupt video."""
    from vbench_async.demo.suite import generate_suite

    generate_suite(root / "suite", n_videos=2, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    videos = root / "suite" / "videos"
    (videos / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2048))
    first = json.loads((root / "suite" / "annotations" / "mc.json").read_text())[0]
    records = [first, {**first, "problem_id": "mc-second", "path": "v001.mp4"},
               {**first, "problem_id": "corrupt", "path": "corrupt.mp4"}]
    (root / "val.json").write_text(json.dumps(records))
    datamap = root / "data.yaml"
    datamap.write_text(yaml.safe_dump({"benchmarks": {"mvbench": {"annotation": str(root / "val.json"),
                                                                  "video_dir": str(videos)}}}))
    return datamap


def test_a_failed_sample_is_recorded_and_the_scores_stand(tmp_path: Path) -> None:
    from vbench_async.demo.tiny_models import ensure_tiny_model
    from vbench_async.train.rollout import HFRollout
    from vbench_async.train.validation import run_dir, validate

    datamap = held_out(tmp_path)
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model": "tiny-qwen2.5-vl", "output_dir": str(tmp_path / "out"),
        "data": {"records": "unused.json", "cache_dir": str(tmp_path / "cache")},
        "validation": {"every": 1, "run": {"selection": {"benchmarks": ["mvbench"], "data_root": str(datamap)},
                                           "sampling": {"max_tokens": 4}, "decode_workers": 1,
                                           "frame_overrides": {"max_frames": 4, "max_pixels": 3136}}}}))
    cfg = load_config(config)
    model_dir = ensure_tiny_model("tiny-qwen2.5-vl")
    engine = HFRollout(str(model_dir), torch.device("cpu"))
    try:
        scores = validate(cfg, 3, DistInfo(0, 1, 0, torch.device("cpu")), engine, str(model_dir), tmp_path / "out")
    finally:
        engine.close()
    assert set(scores) >= {"val/mvbench", "val/samples", "val/failed"} and 0.0 <= scores["val/mvbench"] <= 1.0
    assert (scores["val/samples"], scores["val/failed"]) == (3.0, 1.0)  # the failed sample is in the denominator
    where = run_dir(tmp_path / "out", 3)
    lines = [json.loads(line) for f in (where / "results").glob("mvbench*.jsonl") for line in f.read_text().splitlines()]
    assert len(lines) == 3 and [r["sample_id"] for r in lines if r.get("error")] == ["corrupt"]
    manifest = json.loads((where / "manifest.json").read_text())
    assert manifest["run_config"]["frame_overrides"] == {"max_frames": 4, "max_pixels": 3136}
    assert len(list((tmp_path / "cache").rglob("entries/*/*.safetensors"))) == 2  # the training's frame cache


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
