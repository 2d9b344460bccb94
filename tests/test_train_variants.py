"""One single-process run through the less common paths: GSPO with a k3 KL penalty (reference model), two
mini-batches (old log-probs), DAPO-style dynamic sampling, gated offline mixing, records with images, videos and
text in one micro-batch, validation through the evaluation pipeline, checkpoint and export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]


def _data(root: Path) -> tuple[Path, Path]:
    from PIL import Image

    from vbench_async.demo.suite import generate_suite

    generate_suite(root / "suite", n_videos=3, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    media = root / "suite" / "videos"
    pixels = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(media / "still.png")
    mc = json.loads((root / "suite" / "annotations" / "mc.json").read_text())
    records = [
        {**mc[0], "offline_response": mc[0]["solution"]},
        {"problem_id": "img", "problem": "Is this a photo?", "problem_type": "yes/no",
         "solution": "<answer>No</answer>", "image_path": "still.png", "offline_response": "<answer>No</answer>"},
        {"problem_id": "txt", "problem": "Is 2 larger than 1?", "problem_type": "yes/no",
         "solution": "<answer>Yes</answer>", "offline_response": "<answer>Yes</answer>"},
        {**mc[1], "offline_response": mc[1]["solution"]},
    ]
    (root / "train.json").write_text(json.dumps(records))
    datamap = root / "data.yaml"
    datamap.write_text(yaml.safe_dump({"benchmarks": {"mvbench": {
        "annotation": str(root / "suite" / "annotations" / "mc.json"), "video_dir": str(media)}}}))
    return root / "train.json", datamap


def test_gspo_kl_dynamic_sampling_gated_offline_validation_and_export(tmp_path):
    records, datamap = _data(tmp_path)
    out = tmp_path / "run"
    frames = {"max_frames": 4, "max_pixels": 3136, "image_max_pixels": 3136}
    cfg = {
        "model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 1,
        "data": {"records": str(records), "video_dir": str(tmp_path / "suite" / "videos"),
                 "cache_dir": str(tmp_path / "cache"), "frames": frames, "decode_workers": 1},
        "rollout": {"n": 4, "max_tokens": 6, "offline_per_group": 1, "offline_accuracy_threshold": 0.5},
        "algorithm": {"name": "gspo", "kl": "k3", "kl_coef": 0.05, "dynamic_sampling": True,
                      "max_sampling_tries": 1},
        "train": {"steps": 2, "prompts_per_step": 4, "micro_batch_size": 6, "mini_batches": 2, "lr": 1e-3},
        "checkpoint": {"every": 1, "keep": 1},
        "validation": {"every": 2, "benchmarks": ["mvbench"], "data_root": str(datamap), "backend": "hf",
                       "max_samples": 2, "max_tokens": 4, "frames": {"max_frames": 4, "max_pixels": 3136}},
        "logging": {"progress": False},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([sys.executable, "-m", "vbench_async.train", "--config", str(path)], capture_output=True,
                          text=True, timeout=900, cwd=REPO, env={**env, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        # The random model answers nothing right, so every group is offline-mixed, which gives it a signal and
        # lets it pass the dynamic-sampling filter.
        assert r["rollout/offline_groups"] == r["rollout/groups"] == 4 and r["rollout/dropped"] == 0
        assert r["kl"] is not None and r["kl"] >= 0 and r["ratio_mean"] is not None
        assert r["loss"] is not None and r["grad_norm"] > 0
    assert "val/mvbench" in rows[1] and 0.0 <= rows[1]["val/mvbench"] <= 1.0
    assert (out / "validation" / "step-000002" / "run" / "summary.json").is_file()
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints == ["step-000002"]  # keep: 1
    from vbench_async.models import resolve

    exported = resolve(str(out / "export"))
    assert exported.family == "qwen2.5-vl"
    info = json.loads((out / "export" / "vbench_train.json").read_text())
    assert info["step"] == 2 and info["base_model"] == "tiny-qwen2.5-vl"
    assert json.loads((out / "export" / "config.json").read_text())["dtype"] == "bfloat16"  # the source's dtype
