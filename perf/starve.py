"""Does frame loading starve the engine at real frame budgets? The engine's idle fraction, cold and warm.

A real-layout workload: 150 s clips at 1280x720 (the common size of benchmark videos), 3 multiple-choice questions
each, written as a user's card with Video-MME's frame settings at its 128-frame preset (2 fps, up to 128 frames,
262,144 pixels a frame, 33.5 M pixels a video; the card's default 256 frames give 33,540-token prompts, over the tiny
model's 32,768-token context), the tiny Qwen3-VL, greedy, 16 tokens, the frame cache's default codec.
`vbench-async run` twice: cold (empty frame cache: every video decoded while the engine works) and warm (the cache
filled by the cold run; its entries compressed by then, so loading is decompression).

The idle fraction is the loop's own measure (manifest `loop.engine_idle_fraction`): the share of the time from the
first request to the last answer during which no request was at the engine, between two that were (it waited for
frames). It does not see a wait before the first request, so `waited_fraction` adds it: the time from the engine
being ready (`startup_s`) to the first request (`time_to_first_request_s`), plus the idle time, over the time from
the engine being ready to the last answer. `queue_empty_fraction` says how often a request slot found no loaded sample
waiting.

    PYTHONPATH=. .venv/bin/python perf/starve.py [--videos 18] [--workdir DIR] [--codec zstd|raw]

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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

BENCH = "perf-starve"
CARD = {"id": BENCH, "name": "perf: engine starvation", "task_types": ["multiple choice"],
        "sources": {"unified": {"annotation": "questions.jsonl", "video_dir": "videos"}},
        "prompt": "multiple_choice", "metric": "accuracy",
        "frames": {"fps": 2.0, "max_frames": 128, "max_pixels": 262144, "total_pixels": 33554432}}


def build(work: Path, n_videos: int, seconds: float) -> tuple[Path, Path]:
    from videos import write_video  # tests/support/videos.py: real H.264 files

    data, cards = work / f"data-{n_videos}", work / "cards"
    done = data / "questions.jsonl"
    if not done.exists():
        rows = []
        for i in range(n_videos):
            name = f"v{i:02d}.mp4"
            write_video(data / "videos" / name, seconds=seconds, fps=10, width=1280, height=720, textured=True,
                        seed=i)
            rows += [{"problem_id": f"v{i:02d}-q{q}", "problem": f"Question {q}: which colour is shown most?",
                      "problem_type": "multiple choice", "options": ["A. red", "B. green", "C. blue", "D. white"],
                      "solution": "<answer>A</answer>", "path": name} for q in range(3)]
        done.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cards.mkdir(parents=True, exist_ok=True)
    (cards / f"{BENCH}.yaml").write_text(json.dumps(CARD), encoding="utf-8")  # JSON is YAML
    return data, cards


def run(data: Path, cards: Path, cache: Path, out: Path, codec: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    if codec:
        env["VBENCH_ASYNC_CACHE_CODEC"] = codec
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "vbench_async", "run", "--model", "tiny-qwen3-vl", "--include",
                           str(cards), "--benchmarks", BENCH, "--data-root", str(data), "--max-tokens", "16",
                           "--temperature", "0", "--cache-dir", str(cache), "--output-dir", str(out),
                           "--no-progress", "--no-site"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    stats = json.loads((out / "manifest.json").read_text())
    loop = _find(stats, "loop")
    through = stats["throughput"]
    before_first = max(0.0, through["time_to_first_request_s"] - through["startup_s"])  # engine ready, nothing sent
    waited = before_first + loop["engine_idle_s"]
    return {"wall_s": round(time.time() - t0, 1), "startup_s": through["startup_s"],
            "before_first_request_s": round(before_first, 1),
            "waited_fraction": round(waited / max(loop["loop_wall_s"], 1e-9), 3),  # the loop starts at ready
            **{k: loop.get(k) for k in ("engine_idle_fraction", "engine_idle_s", "queue_empty_fraction",
                                        "loop_wall_s", "frame_wait_s", "engine_s")}}


def _find(tree: object, key: str) -> dict:
    """The first mapping under `key` in the manifest (where the loop's stats are kept)."""
    if isinstance(tree, dict):
        if isinstance(tree.get(key), dict) and "engine_idle_s" in tree[key]:
            return tree[key]
        for v in tree.values():
            found = _find(v, key)
            if found:
                return found
    return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=18)  # 54 requests: more than the 16 slots and 32 queued
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--codec", help="VBENCH_ASYNC_CACHE_CODEC for both runs (default: the cache's default)")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-perf-starve-"))
    data, cards = build(work, args.videos, args.seconds)
    tag = args.codec or "default"
    cache = work / f"cache-{tag}-{time.time_ns()}"
    rows = {}
    for arm in ("cold", "warm"):
        if arm == "warm":
            time.sleep(5)  # the compactor recompresses the cold run's raw entries in the background
        rows[arm] = run(data, cards, cache, work / f"out-{tag}-{arm}-{time.time_ns()}", args.codec)
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{arm}: {json.dumps(rows[arm])} (load {load})", flush=True)
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"SUMMARY starve videos={args.videos} seconds={args.seconds:.0f} codec={tag} "
          f"cold_waited_fraction={rows['cold']['waited_fraction']} "
          f"warm_waited_fraction={rows['warm']['waited_fraction']} "
          f"cold_idle_fraction={rows['cold']['engine_idle_fraction']} "
          f"warm_idle_fraction={rows['warm']['engine_idle_fraction']} "
          f"cold_queue_empty={rows['cold']['queue_empty_fraction']} "
          f"warm_queue_empty={rows['warm']['queue_empty_fraction']} "
          f"cold_s={rows['cold']['wall_s']} warm_s={rows['warm']['wall_s']} load={load}")


if __name__ == "__main__":
    main()
