"""Training sees (issue #36): a learning test whose reward depends on the video rises with the real frames and not with
blanked ones.

The task: seeing-many's yes/no question "Is there more than one shape?", which the seeing models never saw in
training and whose text is the same for every video, so only the pixels answer it. The videos are a seeing-suite split
generated with seed 5 (the evaluation's is seed 0), 48 videos; the generator asks the question of the 32 showing one or
three shapes (16 each): 16 Yes, 16 No. Its records (the split's annotations/many.json) are read in records mode
(`data.records`) with the seeing-many card's prompt template and frame settings, so training renders the prompts and
frames `vbench-async run --benchmarks seeing-many` would. Not via `data.benchmark: seeing-many` and a data map: the
seeing cards have only a demo source, which always reads the built-in seeing suite (seed 0).

The start is the seeing model `seeing-qwen3-vl`, which counts from the pixels (seeing-count: "How many shapes ...?")
but has not been asked this question: it starts at about chance (1/2) and has the features to learn it.
(`seeing-qwen2.5-vl` answers none of the new phrasings with Yes or No, so it gets no reward to learn from; with
"Are the shapes shown at the end of the video?" the Qwen3-VL model collapses to a constant Yes.)

Pure online GRPO, 16 prompts a step: the data order is one permutation of the 32 videos per epoch, so 2 steps are one
epoch and a window of 6 steps holds every video three times: any constant answer scores exactly 1/2 there. The reward
is the benchmark's score alone (reward.format_weight 0), read from the training's own metrics.jsonl.

- real frames, 24 steps: the mean reward of the last 6 steps is clearly above the first 6 and above 1/2 (measured:
  0.527 -> 0.689; 0.717 after 30 steps);
- `data.ablation: blank` (the evaluation's `ablate`, applied after the cache), 12 steps: no rise above what a constant
  answer scores (measured: 0.497 -> 0.500, and 0.500 still after 30 steps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
N_VIDEOS, SEED = 48, 5  # the split: not the evaluation's seed 0 (nor the seeing model's training seeds)
KEPT = 32  # the videos with one or three shapes
PROMPTS, WINDOW = 16, 6  # 2 steps per epoch; a window of 6 steps is 3 whole epochs
STEPS = {"real": 24, "blank": 12}  # blank frames need only two windows to show no rise
QUESTION = "Is there more than one shape?"
CONSTANT = 1 / 2  # what any constant answer scores on a window (Yes and No equally often)
CARD_FRAMES = {"fps": 2.0, "max_frames": 16, "max_pixels": 12544}  # benchmarks/seeing-many.yaml


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    from vbench_async.benchmarks import get_benchmark
    from vbench_async.demo.seeing_suite import SEEING_GROUPS, generate_seeing_suite

    card = get_benchmark("seeing-many").card
    assert card.frames.to_dict() == CARD_FRAMES and card.prompt == {"default": "yes_no"}
    assert SEEING_GROUPS["many"][1] == QUESTION
    root = tmp_path_factory.mktemp("sees")
    generate_seeing_suite(root / "split", n_videos=N_VIDEOS, seed=SEED, workers=1)
    records = json.loads((root / "split" / "annotations" / "many.json").read_text())
    truths = Counter(r["solution"] for r in records)
    assert len(records) == KEPT and set(truths.values()) == {KEPT // 2}, truths
    return root


def _rewards(split: Path, out: Path, steps: int, **data) -> list[float]:
    assert KEPT % PROMPTS == 0 and steps % WINDOW == 0 and WINDOW % (KEPT // PROMPTS) == 0
    cfg = {"model": "seeing-qwen3-vl", "output_dir": str(out), "seed": 0,
           "data": {"records": str(split / "split" / "annotations" / "many.json"),
                    "video_dir": str(split / "split" / "videos"),
                    "prompt_template": "yes_no", "frames": CARD_FRAMES,  # what the seeing-many card renders
                    "cache_dir": str(split / "cache"), "decode_workers": 1, **data},
           "rollout": {"n": 8, "max_tokens": 4}, "algorithm": {"name": "grpo"}, "reward": {"format_weight": 0.0},
           "train": {"steps": steps, "prompts_per_step": PROMPTS, "micro_batch_size": 64, "lr": 1e-3},
           "checkpoint": {"every": 0, "export": False}, "logging": {"progress": False}}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "vbench_async.train", "--config", str(path)], capture_output=True,
                          text=True, timeout=900, cwd=REPO, env=env)
    (out.parent / f"{out.name}.stderr").write_text(proc.stderr)  # kept beside the run, for a failure's cause
    assert proc.returncode == 0, f"training failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == steps and all(r["rollout/offline_groups"] == 0 for r in rows)
    lost = [(i + 1, r["data/dropped_items"], r["data/media_failed"]) for i, r in enumerate(rows)
            if r["data/dropped_items"] or r["data/media_failed"]]
    assert not lost, f"(step, dropped, media failed): {lost}\n{proc.stderr[-6000:]}"  # whole epochs
    return [r["reward/mean"] for r in rows]


def _windows(rewards: list[float], label: str) -> tuple[float, float]:
    before, after = sum(rewards[:WINDOW]) / WINDOW, sum(rewards[-WINDOW:]) / WINDOW
    print(f"\n{label}: reward {before:.3f} (steps 1-{WINDOW}) -> {after:.3f} (the last {WINDOW} steps); "
          f"per step {[round(r, 3) for r in rewards]}")
    return before, after


def test_grpo_reward_rises_with_the_real_frames(split, tmp_path):
    before, after = _windows(_rewards(split, tmp_path / "real", STEPS["real"]), "real frames")
    assert after >= before + 0.1
    assert after >= CONSTANT + 0.1  # above anything a constant answer scores: the policy counts from the pixels


def test_grpo_reward_stays_at_the_constant_answer_level_with_blank_frames(split, tmp_path):
    before, after = _windows(_rewards(split, tmp_path / "blank", STEPS["blank"], ablation="blank"), "blank frames")
    assert after <= CONSTANT + 0.06
    assert before <= CONSTANT + 0.06
