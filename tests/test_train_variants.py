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
        "validation": {"every": 2, "run": {"selection": {"benchmarks": ["mvbench"], "data_root": str(datamap),
                                                         "max_samples": 2},
                                           "sampling": {"max_tokens": 4}, "decode_workers": 1,
                                           "frame_overrides": {"max_frames": 4, "max_pixels": 3136}}},
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
        # The random model answers almost nothing right, so the groups below the accuracy gate are offline-mixed
        # (which gives them a signal and lets them pass the dynamic-sampling filter); a group the random answers
        # happen to get half right is left as it is.
        assert r["rollout/groups"] == 4 and r["rollout/dropped"] == 0 and 1 <= r["rollout/offline_groups"] <= 4
        assert r["kl"] is not None and r["kl"] >= 0 and r["ratio_mean"] is not None
        assert r["loss"] is not None and r["grad_norm"] > 0
    assert "val/mvbench" in rows[1] and 0.0 <= rows[1]["val/mvbench"] <= 1.0
    assert (out / "validation" / "step-000002" / "summary.json").is_file()
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints == ["step-000002"]  # keep: 1
    from vbench_async.models import resolve

    export = out / f"{out.name}-step2"  # named after the run, so a leaderboard row of it says which run it is
    assert f"export:  {export}" in proc.stdout and "reward/mean" in proc.stdout  # the closing table, not a dict
    exported = resolve(str(export))
    assert exported.family == "qwen2.5-vl"
    info = json.loads((export / "vbench_train.json").read_text())
    assert info["step"] == 2 and info["base_model"] == "tiny-qwen2.5-vl"
    assert json.loads((export / "config.json").read_text())["dtype"] == "bfloat16"  # the source's dtype


def _predecessor_records(root: Path) -> Path:
    """Records in the predecessor's training layout: answer, videos / images lists, <video> placeholders,
    has_offline_trajectory + offline_output."""
    from PIL import Image

    from vbench_async.demo.suite import generate_suite

    generate_suite(root / "suite", n_videos=3, questions_per_video=3, min_s=2.0, max_s=3.0, workers=1)
    media = root / "suite" / "videos"
    Image.fromarray(np.full((48, 64, 3), 200, dtype=np.uint8)).save(media / "grey.png")
    mc = [r for r in json.loads((root / "suite" / "annotations" / "mc.json").read_text()) if r.get("path")][:2]
    assert len(mc) == 2
    records = [{"problem_id": f"v{i}", "problem": f"<video>\n{r['problem']}", "problem_type": "multiple choice",
                "data_type": "video", "options": r["options"], "answer": r["solution"], "videos": [r["path"]],
                "has_offline_trajectory": True, "offline_output": r["solution"]} for i, r in enumerate(mc)]
    records.append({"problem_id": "img", "problem": "<image>What colour is this?", "problem_type": "open-ended",
                    "data_type": "image", "answer": "grey", "images": ["grey.png"],
                    "has_offline_trajectory": True, "offline_output": "<answer>grey</answer>"})
    records.append({"problem_id": "num", "problem": "How much is 2 + 3?", "problem_type": "numerical",
                    "data_type": "text", "answer": 5, "has_offline_trajectory": False, "offline_output": ""})
    path = root / "predecessor.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_predecessor_records_train_directly_and_convert(tmp_path):
    from vbench_async.train.config import DataConfig
    from vbench_async.train.data import load_items

    path = _predecessor_records(tmp_path)
    items = load_items(DataConfig(records=str(path), video_dir=str(tmp_path / "suite" / "videos")))
    assert [it.modality for it in items] == ["video", "video", "image", "text"]
    assert "<video>" not in items[0].prompt and items[0].offline and not items[3].offline
    assert items[3].sample.answer == "5"
    out = tmp_path / "run"
    cfg = {
        "model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 2,
        "data": {"records": str(path), "video_dir": str(tmp_path / "suite" / "videos"),
                 "cache_dir": str(tmp_path / "cache"), "decode_workers": 1,
                 "frames": {"max_frames": 4, "max_pixels": 3136, "image_max_pixels": 3136}},
        "rollout": {"n": 2, "max_tokens": 5, "offline_per_group": 1},
        "algorithm": {"name": "dapo", "dynamic_sampling": False, "mask_truncated": True},
        "train": {"steps": 1, "prompts_per_step": 4, "max_tokens_per_micro_batch": 200, "packing": True,
                  "lr": 1e-3},
        "checkpoint": {"every": 0, "export": False}, "logging": {"progress": False},
    }
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "vbench_async.train", "--config", str(cfg_path)], capture_output=True,
                          text=True, timeout=900, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert row["rollout/groups"] == 4 and row["data/dropped_items"] == 0 and row["grad_norm"] > 0
    assert row["rollout/offline_groups"] == 3  # the records with has_offline_trajectory
    assert "attention sdpa, packed micro-batches" in proc.stderr  # padding-free, on CPU attention
    # `vbench-async data convert` writes the same records in the unified layout.
    converted = tmp_path / "unified.jsonl"
    cli = subprocess.run([sys.executable, "-m", "vbench_async", "data", "convert", str(path), str(converted)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cli.returncode == 0 and "4 converted" in cli.stdout, cli.stdout + cli.stderr
    unified = [json.loads(line) for line in converted.read_text().splitlines()]
    assert unified[0]["path"] == json.loads(path.read_text().splitlines()[0])["videos"][0]
    assert unified[2]["image_path"] == "grey.png" and unified[3]["solution"] == "5"
    assert all("answer" not in r and "solution" in r for r in unified)
    again = load_items(DataConfig(records=str(converted), video_dir=str(tmp_path / "suite" / "videos")))
    assert [(a.prompt, a.offline, a.video) for a in again] == [(b.prompt, b.offline, b.video) for b in items]
