"""How long `vbench-async plan` takes on a large suite, with the video headers not yet probed (cold) and probed (warm),
and its peak memory: 10,000 questions over 1,000 video paths (hard links to 20 distinct clips), the real plan code
(`runner.plan`: annotation loading, prompt rendering through the card's templates, the model's chat template and
tokenizer, header store, frame rules) with the built-in tiny Qwen3-VL model (timestamps included).

Cold and warm run in one fresh interpreter each, side by side in this run; the times are of `plan()` (wall and this
process's CPU, which a loaded machine does not inflate); RSS is the process's peak (ru_maxrss). Cold starts from an
empty cache folder: it probes the headers and asks the processor (importing transformers and torch); warm reads both
from the cache (the processor's answers: vbench_async/workload/memo.py).

    PYTHONPATH=. .venv/bin/python perf/plan.py [--records 10000] [--videos 1000] [--contents 20] [--workdir DIR]

Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]


def build(folder: Path, records: int, videos: int, contents: int, distinct_options: bool = False) -> Path:
    from videos import write_video  # tests/support/videos.py: real H.264 files

    clips = [write_video(folder / "clips" / f"c{i}.mp4", seconds=20 + i, fps=10, width=160, height=96, seed=i)
             for i in range(contents)]
    (folder / "videos").mkdir(parents=True, exist_ok=True)
    for v in range(videos):
        target = folder / "videos" / f"v{v:05d}.mp4"
        if not target.exists():
            os.link(clips[v % contents], target)
    # distinct_options: every option line differs between questions, as in most real benchmarks (shared lines are
    # tokenized once, so repeated options would flatter the plan)
    tag = (lambda i: f" ({i})") if distinct_options else (lambda i: "")
    rows = [{"problem_id": f"q{i:06d}", "problem": f"Question {i}: which colour is the square in this video?",
             "problem_type": "multiple choice",
             "options": [f"A. red{tag(i)}", f"B. green{tag(i)}", f"C. blue{tag(i)}", f"D. white{tag(i)}"],
             "solution": "<answer>A</answer>", "path": f"v{i % videos:05d}.mp4"} for i in range(records)]
    (folder / "annotations.json").write_text(json.dumps(rows))
    data_map = folder / "data-map.yaml"
    data_map.write_text(json.dumps({"root": str(folder), "benchmarks": {
        "mmvu": {"annotation": "annotations.json", "video_dir": "videos"}}}))
    return data_map


CHILD = """
import json, resource, sys, time
from pathlib import Path
from vbench_async.benchmarks.selection import Selection
from vbench_async.evaluation.runner import RunConfig, plan
t, c = time.perf_counter(), time.process_time()
w = plan(RunConfig(model="tiny-qwen3-vl", selection=Selection(benchmarks=("mmvu",), data_root=Path(sys.argv[1])),
                   cache_dir=Path(sys.argv[2])))
b = w.benchmarks[0]
print(json.dumps({"seconds": round(time.perf_counter() - t, 2), "cpu_s": round(time.process_time() - c, 2),
                  "planned": b.n_planned,
                  "rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "largest_context": b.largest_context}))
"""


def plan_once(data_map: Path, cache: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(data_map), str(cache)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--videos", type=int, default=1_000)
    ap.add_argument("--contents", type=int, default=20)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--distinct-options", action="store_true", help="every question's option lines differ")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-perf-plan-"))
    data_map = build(work / "data", args.records, args.videos, args.contents, args.distinct_options)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)  # cold: no header probed yet
    cold = plan_once(data_map, cache)
    warm = plan_once(data_map, cache)
    for name, r in (("cold (headers probed)", cold), ("warm (headers cached)", warm)):
        print(f"{name}: {r['seconds']} s wall, {r['cpu_s']} s CPU, {r['planned']} samples planned, "
              f"peak RSS {r['rss_mib']} MiB")
    assert cold["planned"] == warm["planned"] == args.records
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"SUMMARY plan of {args.records} questions on {args.videos} videos ({args.contents} contents"
          f"{', distinct options' if args.distinct_options else ''}), tiny "
          f"Qwen3-VL: cold {cold['seconds']} s ({cold['cpu_s']} s CPU), warm {warm['seconds']} s "
          f"({warm['cpu_s']} s CPU), target warm < 10 s CPU: {'PASS' if warm['cpu_s'] < 10 else 'FAIL'}, "
          f"peak RSS {warm['rss_mib']} MiB (plan() and what it imports), load {load}")


if __name__ == "__main__":
    main()
