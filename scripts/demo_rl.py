"""`make demo-rl`: the whole loop on a CPU in a few minutes, every number measured by this run.

1. evaluate the tiny random model on the demo suite's yes/no benchmark (`--benchmarks demo-yesno,demo-mc` adds the
   multiple-choice one) with `vbench-async run`;
2. RL-train it (`vbench-async train`: GRPO, hybrid groups of 3 sampled + 1 offline answer) on a *training split*
   of the same synthetic generator (other videos and questions: seed 1, not the evaluation's seed 0), with the
   evaluation's prompt templates, frame settings, frame cache and scorers (the reward is the benchmark's score);
3. evaluate the export with the same command;
4. write a leaderboard of both runs (`vbench-async leaderboard`): the index, and a compare page listing the samples
   whose score flipped between the two models, with their frames.

The random model answers nothing in the expected form (0). What the trained one scores depends on the machine, the
steps and the seed: a few minutes of CPU RL teach a 2-layer model the answer's form, often a single answer to every
question ("Yes"), whose score is then the share of questions with that truth, at or below chance, not video
understanding. So the closing table prints, beside both scores, the trained score's 95% interval, chance level and
where the one lies against the other, and warns when one answer makes up 90% or more of a run's answers.

    .venv/bin/python scripts/demo_rl.py [--out runs/demo-rl] [--steps 10]
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

MODEL = "tiny-qwen2.5-vl"
BENCHMARKS = ("demo-yesno",)  # the default; demo-mc is the other card this script knows
GROUPS = {"demo-yesno": "yesno", "demo-mc": "mc"}  # card -> the generator's annotation group
TEMPLATES = {"yes/no": "yes_no", "multiple choice": "multiple_choice"}  # the cards' `prompt:`
FRAMES = {"fps": 2.0, "max_frames": 32, "max_pixels": 65536}  # the cards' frame settings
MAX_TOKENS = 8
STEP_LINE = re.compile(r"step \d+/\d+\b.*")  # the trainer's line per step (train/logger.py)
TRAIN_SPLIT = dict(n_videos=24, questions_per_video=3, seed=1, min_s=2.0, max_s=12.0)


def training_split(home: Path | None = None) -> Path:
    """The generator's training split (seed 1), built once beside the demo suite."""
    from vbench_async.demo._atomic import build_once, default_home
    from vbench_async.demo.suite import SUITE_VERSION, generate_suite

    target = (home or default_home()) / "suites" / f"demo-train-v{SUITE_VERSION}"
    return build_once(target, lambda tmp: generate_suite(tmp, **TRAIN_SPLIT), required=("suite.json",))


def training_records(split: Path, out: Path, benchmarks: tuple[str, ...]) -> Path:
    """The split's records of `benchmarks`' groups, each with its bare ground truth ("Yes", "B") as the offline
    answer: the short form the scorers accept, which a tiny model picks up in a few steps."""
    records = []
    for group in (GROUPS[b] for b in benchmarks):
        for rec in json.loads((split / "annotations" / f"{group}.json").read_text()):
            bare = rec["solution"].removeprefix("<answer>").removesuffix("</answer>")
            records.append({**rec, "problem_id": f"train-{rec['problem_id']}", "offline_response": bare})
    path = out / "train.json"
    path.write_text(json.dumps(records, indent=1))
    return path


def train_config(records: Path, split: Path, out: Path, cache: Path, steps: int) -> Path:
    cfg = {
        "model": MODEL, "output_dir": str(out / f"{MODEL}-rl"), "seed": 0,
        "data": {"records": str(records), "video_dir": str(split / "videos"), "cache_dir": str(cache),
                 "prompt_template": {**TEMPLATES, "default": "yes_no"}, "frames": FRAMES, "decode_workers": 1},
        "rollout": {"n": 4, "offline_per_group": 1, "max_tokens": MAX_TOKENS},
        "algorithm": {"name": "grpo"},
        "train": {"steps": steps, "prompts_per_step": 4, "micro_batch_size": 16, "lr": 5e-3},
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


def evaluate(model: str, name: str, out: Path, cache: Path, benchmarks: tuple[str, ...]) -> RunReading:
    from vbench_async.cli.rl_report import RunReading

    run_dir = out / "runs" / name
    cli("run", "--model", model, "--name", name, "--benchmarks", ",".join(benchmarks), "--max-tokens",
        str(MAX_TOKENS), "--cache-dir", str(cache), "--output-dir", str(run_dir), "--no-site", "--no-progress")
    return RunReading.of(name, run_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "demo-rl", help="where runs, training and site go")
    ap.add_argument("--steps", type=int, default=12, help="training steps")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS),
                    help=f"demo cards to train for and evaluate on (any of {', '.join(GROUPS)})")
    args = ap.parse_args(argv)
    benchmarks = tuple(args.benchmarks.split(","))
    unknown = [b for b in benchmarks if b not in GROUPS]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"  # one frame cache for both evaluations and the training
    t0 = time.perf_counter()
    print(f"[1/4] evaluating the untrained {MODEL} on {', '.join(benchmarks)}", flush=True)
    before = evaluate(MODEL, "untrained", out, cache, benchmarks)
    split = training_split()
    records = training_records(split, out, benchmarks)
    print(f"[2/4] RL training on the generator's training split ({len(json.loads(records.read_text()))} "
          f"questions, {args.steps} steps)", flush=True)
    train = cli("train", "--config", str(train_config(records, split, out, cache, args.steps)), relay=STEP_LINE)
    export = next(line.split("export:", 1)[1].split()[0] for line in train.stdout.splitlines() if "export:" in line)
    print(f"[3/4] evaluating the export {export}", flush=True)
    after = evaluate(export, "rl-trained", out, cache, benchmarks)
    print("[4/4] writing the leaderboard", flush=True)
    site = out / "site"
    cli("leaderboard", str(out / "runs" / "untrained"), str(out / "runs" / "rl-trained"), "-o", str(site))
    from vbench_async.cli.rl_report import rl_table

    print()
    print(rl_table(before, after, benchmarks), end="")
    compares = sorted((site / "compare").glob("*.html"))
    print(f"\nleaderboard: {site / 'index.html'}")
    for page in compares:
        print(f"compare (flipped samples with their frames): {page}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    scores = {run.name: {b: run.block(b)["score"] for b in benchmarks} for run in (before, after)}
    json.dump({"untrained": scores["untrained"], "rl_trained": scores["rl-trained"],
               "chance": {b: after.block(b).get("chance") for b in benchmarks},
               "interval": {b: after.block(b).get("interval") for b in benchmarks},
               "constant_answer": {f"{run.name}/{b}": run.spreads[b].constant_answer() for run in (before, after)
                                   for b in benchmarks if b in run.spreads and run.spreads[b].constant_answer()},
               "export": export, "site": str(site),
               "compare": [str(p) for p in compares]}, (out / "demo_rl.json").open("w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
