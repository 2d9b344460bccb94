"""Training validation (train/checkpoint_eval.py) keeps its scores when some samples fail: `vbench-async run` exits
1 for "some samples failed", which used to discard every score of the validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from vbench_async.train.checkpoint_eval import evaluate_checkpoint
from vbench_async.train.config import ValidationConfig


def test_a_failed_sample_does_not_discard_the_validation_scores(tmp_path: Path) -> None:
    from vbench_async.demo.suite import generate_suite
    from vbench_async.demo.tiny_models import ensure_tiny_model

    generate_suite(tmp_path / "suite", n_videos=2, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    videos = tmp_path / "suite" / "videos"
    (videos / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2048))
    records = [r for r in json.loads((tmp_path / "suite" / "annotations" / "mc.json").read_text())][:2]
    records.append({**records[0], "problem_id": "corrupt", "path": "corrupt.mp4"})
    (tmp_path / "val.json").write_text(json.dumps(records))
    datamap = tmp_path / "data.yaml"
    datamap.write_text(yaml.safe_dump({"benchmarks": {"mvbench": {"annotation": str(tmp_path / "val.json"),
                                                                  "video_dir": str(videos)}}}))
    cfg = ValidationConfig(benchmarks=["mvbench"], data_root=str(datamap), backend="hf", max_tokens=4,
                           frames={"max_frames": 4, "max_pixels": 3136}, timeout_s=600)
    out = tmp_path / "validation" / "run"
    scores = evaluate_checkpoint(ensure_tiny_model("tiny-qwen2.5-vl"), cfg, out, str(tmp_path / "cache"))
    assert set(scores) == {"val/mvbench"} and 0.0 <= scores["val/mvbench"] <= 1.0
    lines = [json.loads(line) for f in (out / "results").glob("mvbench*.jsonl") for line in f.read_text().splitlines()]
    assert len(lines) == len(records) and [r["sample_id"] for r in lines if r.get("error")] == ["corrupt"]
