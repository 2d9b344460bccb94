"""A tiny held-out set for training validation: mvbench's card over one question on each of two good videos and one
on a corrupt video (a sample that must fail and still be counted)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml


def held_out(root: Path) -> Path:
    """Write the videos and annotations under `root`; returns the data map to pass as `selection.data_root`."""
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


def validation_run(datamap: Path) -> dict:
    """`validation.run` over the held-out set: short answers, small frames, one decoder process."""
    return {"selection": {"benchmarks": ["mvbench"], "data_root": str(datamap)}, "sampling": {"max_tokens": 4},
            "decode_workers": 1, "frame_overrides": {"max_frames": 4, "max_pixels": 3136}}


def train_config(root: Path, window: int = 1024, datamap: Path | None = None):
    """A training config (never trained here, output and cache under `root`) whose validation runs over the held-out
    set `datamap` (default: one written under `root`)."""
    from vbench_async.train.config import load_config

    config = root / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model": "tiny-qwen2.5-vl", "output_dir": str(root / "out"),
        "data": {"records": "unused.json", "cache_dir": str(root / "cache")},
        "rollout": {"max_model_len": window, "max_tokens": 8},
        "validation": {"every": 1, "run": validation_run(datamap or held_out(root))}}))
    return load_config(config)


def validate_on(engine, model_dir: str, root: Path, step: int = 3, window: int = 1024,
                datamap: Path | None = None) -> Path:
    """Validate on `engine` (one process) over the held-out set, then check what any validation must give: scores,
    every sample in the run directory, the corrupt video's as the one failure, counted. Returns the run directory."""
    import torch

    from vbench_async.train.fsdp import DistInfo
    from vbench_async.train.validation import run_dir, validate

    cfg = train_config(root, window, datamap)
    scores = validate(cfg, step, DistInfo(0, 1, 0, torch.device("cpu")), engine, model_dir, root / "out")
    check_scores(scores)
    where = run_dir(root / "out", step)
    lines = [json.loads(line) for f in (where / "results").glob("mvbench*.jsonl")
             for line in f.read_text().splitlines()]
    assert len(lines) == 3 and [r["sample_id"] for r in lines if r.get("error")] == ["corrupt"]
    assert all(r["prompt_tokens"] > 0 and r["output_tokens"] > 0 for r in lines if not r.get("error"))
    return where


def check_scores(scores: dict[str, float]) -> None:
    assert set(scores) >= {"val/mvbench", "val/samples", "val/failed"} and 0.0 <= scores["val/mvbench"] <= 1.0
    assert (scores["val/samples"], scores["val/failed"]) == (3.0, 1.0)  # the failed sample is in the denominator
