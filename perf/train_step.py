"""Training step time: frames from the cache vs decoding the videos on the fly (the predecessor measured 1.47x).

    PYTHONPATH=. .venv/bin/python perf/train_step.py [--steps 6] [--videos 4] [--seconds 20] [--workdir DIR]

One run trains the tiny Qwen2.5-VL twice with the same config and seed, once with `data.frame_source: cache`
(the cache is filled before step 1, so no step decodes) and once with `decode` (every rollout decodes its prompts'
videos, as a decode-at-load-time trainer does). Videos are 640x360, 30 fps, textured H.264 clips (real decoding
work); each step samples 16 frames per video. Step times are means over steps 2..N (step 1 pays one-off costs).
Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.videos import write_video  # noqa: E402  (tests/support/videos.py: the PyAV writer the tests use)

PHASES = ("time/media_s", "time/rollout_s", "time/update_s", "time/step_s")


def make_data(workdir: Path, n_videos: int, seconds: float) -> Path:
    records = []
    for i in range(n_videos):
        path = workdir / "videos" / f"clip{i}.mp4"
        if not path.exists():
            t0 = time.perf_counter()
            write_video(path, seconds=seconds, fps=30, width=640, height=360, gop=250, textured=True, seed=i)
            print(f"generated {path.name}: {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")
        records.append({"problem_id": f"q{i}", "problem": "What moves in the video?", "problem_type": "multiple choice",
                        "options": ["A. a texture", "B. a car", "C. a dog", "D. nothing"],
                        "solution": "<answer>A</answer>", "path": path.name})
    out = workdir / "train.json"
    out.write_text(json.dumps(records))
    return out


def train(workdir: Path, records: Path, source: str, steps: int, n_videos: int) -> list[dict]:
    out = workdir / f"run-{source}"
    cfg = {
        "model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 0,
        "data": {"records": str(records), "video_dir": str(workdir / "videos"), "cache_dir": str(workdir / "cache"),
                 "frames": {"fps": 2.0, "max_frames": 16, "max_pixels": 112 * 112}, "frame_source": source},
        "rollout": {"n": 4, "max_tokens": 8},
        "train": {"steps": steps, "prompts_per_step": n_videos, "micro_batch_size": 4 * n_videos, "lr": 1e-4},
        "checkpoint": {"every": 0, "export": False, "resume": "none"},
        "logging": {"progress": False},
    }
    path = workdir / f"{source}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    (out / "metrics.jsonl").unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vbench_async.train", "--config", str(path)], check=True, cwd=ROOT,
                   env=env, stdout=subprocess.DEVNULL)
    print(f"trained with frame_source={source}: {time.perf_counter() - t0:.1f} s for the whole process")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--videos", type=int, default=4, help="prompts (one video each) per step")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each generated clip")
    ap.add_argument("--workdir", type=Path, help="keep generated videos and the cache here (default: a temp dir)")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (step 1 is excluded from the means)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        records = make_data(workdir, args.videos, args.seconds)
        runs = {source: train(workdir, records, source, args.steps, args.videos) for source in ("cache", "decode")}
    steady = {source: rows[1:] for source, rows in runs.items()}
    print(f"\n== per-step seconds, mean of steps 2..{args.steps} ({args.videos} videos x 4 samples per step) ==")
    print(f"{'phase':<16} {'cache':>8} {'decode':>8} {'ratio':>7}")
    for key in PHASES:
        c, d = mean(steady["cache"], key), mean(steady["decode"], key)
        print(f"{key:<16} {c:8.3f} {d:8.3f} {d / c if c else float('inf'):6.2f}x")
    decoded = {s: sum(r["frames/decoded"] for r in rows) for s, rows in runs.items()}
    print(f"videos decoded during training: cache {decoded['cache']:.0f}, decode {decoded['decode']:.0f}")
    step_c, step_d = mean(steady["cache"], "time/step_s"), mean(steady["decode"], "time/step_s")
    media_c, media_d = mean(steady["cache"], "time/media_s"), mean(steady["decode"], "time/media_s")
    speedup = step_d / step_c
    # On a shared machine the other phases drift between the two runs; this ratio charges only the frame loading.
    attributable = (step_c - media_c + media_d) / step_c
    print(f"decode share of a decode-mode step: {media_d / step_d:.0%}; step ratio from frame loading alone: "
          f"{attributable:.2f}x")
    tok_c, tok_d = (sum(r["tokens/step"] for r in steady[s]) / sum(r["time/step_s"] for r in steady[s])
                    for s in ("cache", "decode"))
    print(f"tokens per second (prompt + response, all ranks): cache {tok_c:.0f}, on the fly {tok_d:.0f}")
    print(f"\nSUMMARY train_step_cached_vs_on_the_fly={speedup:.2f}x (frame loading alone: {attributable:.2f}x) "
          f"tokens_per_s_cached={tok_c:.0f} tokens_per_s_on_the_fly={tok_d:.0f} "
          f"media_load_speedup={media_d / max(media_c, 1e-9):.0f}x "
          f"(tiny-qwen2.5-vl, {args.videos}x{args.seconds:.0f}s 640x360 videos, 16 frames, steps 2-{args.steps}; "
          f"predecessor: 1.47x and 797 -> 1,175 tok/s on Qwen3-VL-8B, 32 GPUs)")

if __name__ == "__main__":
    main()
