"""`make demo-rl`: RL teaches a model that sees a new video question, on a CPU in a few minutes; every number is
measured by this run.

The question is seeing-many's "Is there more than one shape?", asked of videos with one or three shapes (half Yes,
half No). Its text is the same for every video, so only the pixels answer it. The start is the seeing model
`seeing-qwen3-vl`, which counts shapes (seeing-count) but was never asked this question: it starts near chance.

1. evaluate it on seeing-many with `vbench-async run`, with the real frames and with blanked ones (`--ablation`);
2. RL-train it (`vbench-async train`: pure online GRPO, 8 samples a question, the reward the benchmark's score alone)
   on a *training split* of the same generator (144 other videos, seed 5, not the evaluation's seed 0: 96 questions),
   with the card's prompt template and frame settings and the evaluation's frame cache and scorer;
3. evaluate the export with the same command;
4. write a leaderboard of both runs (`vbench-async leaderboard`): the index, and a compare page listing the samples
   whose score flipped between the two models, with their frames.

The closing table prints both scores with the trained score's 95% interval, chance level and where the one lies
against the other, then both models' blank-frames scores: the trained model's gain is from the pixels when its
blank-frames score stays at chance. It warns when one answer makes up 90% or more of a run's answers.

    .venv/bin/python scripts/demo_rl.py [--out runs/demo-rl] [--steps 48]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from vbench_async.cli.rl_report import RunReading

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "seeing-qwen3-vl"
BENCHMARK = "seeing-many"
MAX_TOKENS = 4  # "Yes" or "No"
# Measured on the 96 training questions (seed 5): lr 1e-3 collapses to one answer within a few steps; 2e-4 and 3e-4
# rise steadily (reward 0.50 -> 0.73 after 60 and 48 steps; seeing-many 59.4 -> 75.0 both). On the 32 questions of
# 48 videos the reward rose too (0.53 -> 0.69 at 1e-3) but seeing-many did not: the videos were learned by heart.
LR = 3e-4
STEPS = 48  # 6 steps are one epoch of the 96 training questions
STEP_LINE = re.compile(r"step \d+/\d+\b.*")  # the trainer's line per step (train/logger.py)


def train_config(split: Path, out: Path, cache: Path, steps: int) -> Path:
    """Pure online GRPO on the split's seeing-many records, rendered as the card renders them (its template and
    frames): 16 questions a step, 6 steps an epoch of the 96."""
    from vbench_async.benchmarks import get_benchmark

    card = get_benchmark(BENCHMARK).card
    cfg = {
        "model": MODEL, "output_dir": str(out / f"{MODEL}-rl"), "seed": 0,
        "data": {"records": str(split / "annotations" / "many.json"), "video_dir": str(split / "videos"),
                 "cache_dir": str(cache), "prompt_template": card.prompt, "frames": card.frames.to_dict(),
                 "decode_workers": 1},
        "rollout": {"n": 8, "max_tokens": MAX_TOKENS},
        "algorithm": {"name": "grpo"},
        "reward": {"format_weight": 0.0},
        "train": {"steps": steps, "prompts_per_step": 16, "micro_batch_size": 64, "lr": LR},
        "checkpoint": {"every": 0, "export": True},
        "logging": {"progress": False},
    }
    path = out / "train.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    return env


def cli(*args: str, relay: re.Pattern[str] | None = None) -> subprocess.CompletedProcess:
    """`vbench-async ARGS`, its output captured; lines matching `relay` are printed as they come (the training's
    step lines: minutes of silence otherwise)."""
    cmd = [sys.executable, "-m", "vbench_async", *args]
    if relay is None:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env())
    else:
        lines = []
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                              env=_env()) as p:
            assert p.stdout is not None
            for line in p.stdout:
                lines.append(line)
                found = relay.search(line)
                if found:
                    print(f"      {found.group(0).strip()}", flush=True)
        proc = subprocess.CompletedProcess(cmd, p.returncode, "".join(lines), "")
    if proc.returncode != 0:
        sys.exit(f"vbench-async {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                 f"{proc.stderr[-5000:]}")
    return proc


def evaluate(model: str, name: str, out: Path, cache: Path) -> tuple[RunReading, RunReading]:
    """The run of `model` on the benchmark with its frames, and the same run with blank frames."""
    from vbench_async.cli.ablations import ablation_dir
    from vbench_async.cli.rl_report import RunReading

    run_dir = out / "runs" / name
    cli("run", "--model", model, "--name", name, "--benchmarks", BENCHMARK, "--ablation", "none,blank",
        "--max-tokens", str(MAX_TOKENS), "--cache-dir", str(cache), "--output-dir", str(run_dir), "--no-site",
        "--no-progress")
    return RunReading.of(name, run_dir), RunReading.of(f"{name} (blank)", ablation_dir(run_dir, "blank"))


def rewards(train_dir: Path) -> list[float]:
    """The training's mean reward per step, from its own metrics.jsonl."""
    return [json.loads(line)["reward/mean"] for line in (train_dir / "metrics.jsonl").read_text().splitlines()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "demo-rl", help="where runs, training and site go")
    ap.add_argument("--steps", type=int, default=STEPS,
                    help="training steps of 16 questions (6 are one epoch of the 96 training questions)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    from vbench_async.demo.seeing_suite import TRAINING_SPLIT_SEED, ensure_seeing_training_split

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"  # one frame cache for both evaluations and the training
    t0 = time.perf_counter()
    print(f"[1/4] evaluating {MODEL} on {BENCHMARK}, with its frames and with blank ones", flush=True)
    before, before_blank = evaluate(MODEL, "untrained", out, cache)
    split = ensure_seeing_training_split()
    print(f"[2/4] RL training on {BENCHMARK}'s question about other videos (seed {TRAINING_SPLIT_SEED}), "
          f"{args.steps} steps", flush=True)
    train = cli("train", "--config", str(train_config(split, out, cache, args.steps)), relay=STEP_LINE)
    export = next(line.split("export:", 1)[1].split()[0] for line in train.stdout.splitlines() if "export:" in line)
    print(f"[3/4] evaluating the export {export}", flush=True)
    after, after_blank = evaluate(export, "rl-trained", out, cache)
    print("[4/4] writing the leaderboard", flush=True)
    site = out / "site"
    cli("leaderboard", str(out / "runs" / "untrained"), str(out / "runs" / "rl-trained"), "-o", str(site))
    from vbench_async.cli.output import pct
    from vbench_async.cli.rl_report import rl_table

    per_step = rewards(out / f"{MODEL}-rl")
    window = min(6, len(per_step))  # one epoch: a constant answer scores exactly 1/2 on it
    first, last = (sum(r) / window for r in (per_step[:window], per_step[-window:]))
    print()
    print(rl_table(before, after, (BENCHMARK,)), end="")
    print(f"with blank frames: {before.name} {pct(before_blank.block(BENCHMARK).score)}, "
          f"{after.name} {pct(after_blank.block(BENCHMARK).score)} (chance 50.00)")
    print(f"training reward (mean of {window} steps): {first:.3f} at the start, {last:.3f} at the end")
    compares = sorted((site / "compare").glob("*.html"))
    print(f"\nleaderboard: {site / 'index.html'}")
    for page in compares:
        print(f"compare (flipped samples with their frames): {page}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    runs = (before, after, before_blank, after_blank)
    json.dump({"benchmark": BENCHMARK, **{run.name: run.block(BENCHMARK).score for run in runs},
               "chance": after.block(BENCHMARK).chance,
               "interval": after.block(BENCHMARK).interval.to_json() if after.block(BENCHMARK).interval else None,
               "reward": per_step,
               "constant_answer": {run.name: run.spreads[BENCHMARK].constant_answer() for run in runs
                                   if BENCHMARK in run.spreads and run.spreads[BENCHMARK].constant_answer()},
               "export": export, "site": str(site), "compare": [str(p) for p in compares]},
              (out / "demo_rl.json").open("w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
