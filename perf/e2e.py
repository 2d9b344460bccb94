"""End to end against the engine's limit: how much of what a user waits for is the engine, in one sitting.

A fixed synthetic workload (40 generated videos of 10-60 s at 320x240 / 640x360, 3 multiple-choice questions each,
written as a user's own card, `--include`) and the project's tiny Qwen3-VL, 1 fps / 16 frames, greedy, 16 tokens,
`--prompt-variant predecessor`. Each round measures, in an order that rotates from round to round:

- limit: a bare vLLM `AsyncLLM` with the engine settings `vbench-async run` used (read from its manifest), fed the
  same prompts with the frames already in memory; its start-up (process launch to engine ready: interpreter, `import
  vllm`, engine construction) and its generation (all requests submitted at once, to the last answer) apart;
- cold: `vbench-async run` with an empty frame cache and a fresh output directory (process launch to exit);
- warm: the same with the frame cache filled;
- serve: the second job sent to a `vbench-async serve` whose engine the first job started (submission to result),
  on a second workload of the same shape (other videos, other questions: nothing of the first job's prompts in the
  engine's caches), with the same prompt variant as the runs (a job field); the first job's site waits for the
  server's queue to be idle (`serve.server.SITE_GRACE_S`), so the second job does not share the machine with it;
- sweep: `vbench-async run --max-frames 8,16,32` on a filled cache.

Before the rounds an untimed set-up run fills the warm cache (every budget), builds the tiny model and records the
engine settings. The phases of cold and warm runs come from $VBENCH_ASYNC_PHASES marks (vbench_async/phases.py).

Ratios (medians over rounds): cold and warm over the limit (start-up + generation); serve's second job over the
limit's generation plus the warm run's plan phase (what a kept engine cannot avoid); the sweep over three limits.
Many processes share this machine, so absolute times are noisy: compare ratios measured side by side, with the load.

    PYTHONPATH=. .venv/bin/python perf/e2e.py [--rounds 3 | --quick] [--workdir DIR]

Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

MODEL = "tiny-qwen3-vl"
BENCH = "perf-e2e"
N_VIDEOS = 40
BUDGETS = (8, 16, 32)
ARMS = ("limit", "cold", "warm", "serve", "sweep")
# (phase, from mark, to mark): marks of vbench_async/phases.py; "launch" and "exit" are this script's own.
PHASES = (("imports", "launch", "parsed"), ("plan", "parsed", "planned"), ("preprocess", "planned", "preprocessed"),
          ("engine start", "planned", "engine_started"), ("loop", "engine_started", "loop_done"),
          ("summary", "loop_done", "table"), ("site", "table", "site"), ("exit", "returned", "exit"))
CARD = {"id": BENCH, "name": "perf: end to end", "sources": {"unified": {"annotation": "questions.jsonl",
                                                                          "video_dir": "videos"}},
        "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy",
        "frames": {"fps": 1.0, "max_frames": 16}}
COLOURS = ["red", "green", "blue", "white"]


# -- the workload --------------------------------------------------------------------------------------------------
def build_workload(work: Path, n_videos: int = N_VIDEOS, second: bool = False) -> tuple[Path, Path]:
    """(data root, card folder), generated once per work folder and size. `second`: a workload of the same shape
    (durations, sizes, question count) with other videos and other questions: serve's second job, which must not
    find the first job's prompts or frames in the engine's prefix or encoder caches."""
    from videos import write_video  # tests/support/videos.py: real H.264 files

    data, cards = work / f"data-{n_videos}{'-second' if second else ''}", work / "cards"
    done = data / "questions.jsonl"
    if done.exists():
        return data, cards
    rows = []
    for i in range(n_videos):
        seconds = 10 + round(50 * i / max(n_videos - 1, 1))
        width, height = (320, 240) if i % 2 == 0 else (640, 360)
        name = f"v{i:02d}.mp4"
        write_video(data / "videos" / name, seconds=seconds, fps=10, width=width, height=height, textured=True,
                    seed=i + (1000 if second else 0))
        for q in range(3):
            problem = (f"Question {q}: which colour is shown most?" if not second
                       else f"Second job, question {q}: which colour do you see least often in this clip?")
            colours = COLOURS if not second else COLOURS[::-1]
            rows.append({"problem_id": f"v{i:02d}-q{q}", "problem": problem, "problem_type": "multiple choice",
                         "options": [f"{chr(65 + k)}. {c}" for k, c in enumerate(colours)],
                         "solution": f"<answer>{chr(65 + (i + q) % 4)}</answer>", "path": name})
    cards.mkdir(parents=True, exist_ok=True)
    (cards / f"{BENCH}.yaml").write_text(json.dumps(CARD), encoding="utf-8")  # JSON is YAML
    tmp = done.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.rename(done)
    return data, cards


def run_args(data: Path, cards: Path, cache: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "vbench_async", "run", "--model", MODEL, "--include", str(cards), "--benchmarks",
            BENCH, "--data-root", str(data), "--prompt-variant", "predecessor", "--max-tokens", "16",
            "--temperature", "0", "--cache-dir", str(cache), "--output-dir", str(out), "--no-progress", *extra]


def env(phases: Path | None = None) -> dict[str, str]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
         "TOKENIZERS_PARALLELISM": "false"}
    e.pop("VBENCH_ASYNC_PHASES", None)
    if phases is not None:
        e["VBENCH_ASYNC_PHASES"] = str(phases)
    return e


def timed_cli(args: list[str], phases: Path | None = None) -> tuple[float, dict[str, float]]:
    """Wall seconds of one command, and its phase marks (seconds since launch)."""
    launch = time.time()
    proc = subprocess.run(args, cwd=ROOT, env=env(phases), capture_output=True, text=True, timeout=1800)
    end = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[2:5])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    marks = {"launch": 0.0, "exit": end - launch}
    if phases is not None and phases.exists():
        for line in phases.read_text().splitlines():
            m = json.loads(line)
            marks.setdefault(m["phase"], m["t"] - launch)
    settle(Path(args[args.index("--output-dir") + 1]))
    return end - launch, marks


def settle(run_dir: Path, timeout: float = 600) -> None:
    """Untimed: wait for the site a run left building in the background (logs/site.log), so that it does not slow
    the next measurement down."""
    deadline = time.monotonic() + timeout
    logs = [run_dir / "logs" / "site.log"]
    def running(log: Path) -> bool:
        text = log.read_text() if log.exists() else "leaderboard of"
        return not any(word in text for word in ("leaderboard of", "Traceback", "error:"))

    while any(running(p) for p in logs) and time.monotonic() < deadline:
        time.sleep(0.2)


# -- the limit -----------------------------------------------------------------------------------------------------
LIMIT_CHILD = r"""
import asyncio, dataclasses, json, os, sys, time
launch = float(sys.argv[1])
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # as the project's backend runs one CPU worker
from vllm.v1.engine.async_llm import AsyncLLM
from vbench_async.backends.vllm import VLLMBackend, VLLMSettings
settings = json.loads(sys.argv[2])
known = {f.name for f in dataclasses.fields(VLLMSettings)}
backend = VLLMBackend(sys.argv[3], VLLMSettings(**{k: v for k, v in settings.items() if k in known}))
engine = AsyncLLM.from_engine_args(backend.engine_args())
started = time.time()

# Not timed: prompts rendered and frames loaded into memory, as the limit assumes.
from transformers import AutoProcessor
from pathlib import Path
from vbench_async.backends.base import Request, SamplingParams, VideoInput
from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.include import add_include
from vbench_async.benchmarks.selection import Selection
from vbench_async.frames import FrameCache
from vbench_async import models
data, cards, cache_dir = Path(sys.argv[4]), Path(sys.argv[5]), Path(sys.argv[6])
add_include(cards)
bench = get_benchmark("perf-e2e")
bench.prompt_variant = "predecessor"
model = models.resolve("tiny-qwen3-vl")
spec = bench.frame_spec(model, {})
backend._processor = AutoProcessor.from_pretrained(backend.model)
cache = FrameCache(cache_dir)
sampling = SamplingParams(max_tokens=16, temperature=0.0)
inputs = []
for s in Selection(benchmarks=("perf-e2e",), data_root=data).samples(bench):
    v = cache.get_or_decode(bench.video_path(s, data), spec, s.window)
    req = Request(request_id=s.key, prompt=bench.render_prompt(s),
                  videos=(VideoInput(frames=v.frames, metadata=v.hf_metadata(), uuid=v.key),), sampling=sampling)
    inputs.append((backend.engine_input(req), backend.sampling_params(req), req.request_id))

async def generate_all():
    async def one(inp, sp, rid):
        async for out in engine.generate(inp, sp, rid):
            pass
    t = time.time()
    await asyncio.gather(*(one(*x) for x in inputs))
    return time.time() - t

gen = asyncio.run(generate_all())
Path(sys.argv[7]).write_text(json.dumps({"startup_s": started - launch, "generation_s": gen, "requests": len(inputs)}))
engine.shutdown(timeout=0.5)
os._exit(0)
"""


def limit(settings: dict[str, Any], data: Path, cards: Path, cache: Path, out: Path) -> dict[str, float]:
    launch = time.time()
    proc = subprocess.run([sys.executable, "-c", LIMIT_CHILD, str(launch), json.dumps(settings), MODEL_PATH[0],
                           str(data), str(cards), str(cache), str(out)], cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"the limit's engine failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    r = json.loads(out.read_text())
    return {"startup_s": r["startup_s"], "generation_s": r["generation_s"],
            "total_s": r["startup_s"] + r["generation_s"]}


MODEL_PATH: list[str] = []  # the tiny model's directory, resolved once


# -- serve ---------------------------------------------------------------------------------------------------------
def serve_second(data: Path, second: Path, cards: Path, cache: Path, work: Path) -> dict[str, float]:
    """The first job on `data` starts the engine; the second, timed, runs `second`: other videos and questions, so
    nothing of it is in the engine's prefix or encoder caches (its frames are in the frame cache, as for warm)."""
    from vbench_async.serve import client

    # The server's own folders: its jobs may write only under --output-root, read only --data-root and --include.
    proc = subprocess.Popen([sys.executable, "-m", "vbench_async", "serve", "--model", MODEL, "--port", "0",
                             "--cache-dir", str(cache), "--output-root", str(work), "--data-root", str(data),
                             "--data-root", str(second), "--include", str(cards)],
                            cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", proc.stdout.readline())
        if not match:
            raise SystemExit("serve did not start")
        url = match.group(1)
        times = []
        for n, root in ((1, data), (2, second)):
            t0 = time.time()
            selection = {"benchmarks": [BENCH], "include": [str(cards)], "data_root": str(root)}
            record = client.submit(url, {"selection": selection, "prompt": {"prompt_variant": "predecessor"},
                                         "sampling": {"max_tokens": 16, "temperature": 0.0},
                                         "output_dir": str(work / f"job{n}")})
            record = client.wait(url, record["id"], poll_s=0.05)
            if record["status"] != "done":
                raise SystemExit(f"serve job {n} {record['status']}: {record.get('error')}")
            times.append(time.time() - t0)
        starts = client.health(url)["engine_starts"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"first_s": times[0], "second_s": times[1], "engine_starts": starts}


# -- the sitting ---------------------------------------------------------------------------------------------------
def spread(xs: list[float]) -> float:
    return max(xs) - min(xs) if xs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round (a quick look; the acceptance figures use 3)")
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset of " + ",".join(ARMS))
    ap.add_argument("--videos", type=int, default=N_VIDEOS,
                    help="videos in the workload (3 questions each); fewer for a look on a crowded machine")
    ap.add_argument("--workdir", type=Path, help="keeps the generated workload between invocations")
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    t_sitting = time.time()
    arms = [a for a in args.arms.split(",") if a]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-perf-e2e-"))
    data, cards = build_workload(work, args.videos)
    second = build_workload(work, args.videos, second=True)[0] if "serve" in arms else data
    from vbench_async import models

    MODEL_PATH.append(models.resolve(MODEL).path)  # builds the tiny model before anything is timed
    warm_cache = work / f"cache-warm-{args.videos}"
    print(f"workload: {args.videos} videos, {3 * args.videos} questions in {data}; set-up run (untimed)", flush=True)
    setup = work / "setup"
    shutil.rmtree(setup, ignore_errors=True)
    timed_cli(run_args(data, cards, warm_cache, setup / "sweep", "--mode", "preprocess", "--max-frames",
                       ",".join(map(str, BUDGETS))))
    timed_cli(run_args(data, cards, warm_cache, setup / "run", "--no-site"))
    if second != data:  # serve's second job finds its frames cached, as the warm run does
        timed_cli(run_args(second, cards, warm_cache, setup / "second", "--mode", "preprocess"))
    settings = json.loads((setup / "run" / "manifest.json").read_text())["backend"]["options"]

    results: dict[str, list[Any]] = {a: [] for a in arms}
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        rdir = work / f"round{r}"
        shutil.rmtree(rdir, ignore_errors=True)
        rdir.mkdir(parents=True)
        steps: dict[str, Callable[[], Any]] = {
            "limit": lambda: limit(settings, data, cards, warm_cache, rdir / "limit.json"),
            "cold": lambda: timed_cli(run_args(data, cards, rdir / "cache-cold", rdir / "cold"), rdir / "cold.jsonl"),
            "warm": lambda: timed_cli(run_args(data, cards, warm_cache, rdir / "warm"), rdir / "warm.jsonl"),
            "serve": lambda: serve_second(data, second, cards, warm_cache, rdir / "serve"),
            "sweep": lambda: timed_cli(run_args(data, cards, warm_cache, rdir / "sweep", "--max-frames",
                                                ",".join(map(str, BUDGETS))))[0],
        }
        for arm in order:
            value = steps[arm]()
            results[arm].append(value)
            shown = value if not isinstance(value, tuple) else value[0]
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"round {r + 1}/{rounds} {arm}: {json.dumps(shown, default=lambda x: round(x, 2))} (load {load})",
                  flush=True)

    report(results, rounds, args.videos)
    print(f"(the sitting took {time.time() - t_sitting:.0f} s, set-up included)")


def report(results: dict[str, list[Any]], rounds: int, videos: int) -> None:
    med = statistics.median
    fields: list[str] = [f"videos={videos}", f"questions={3 * videos}", f"rounds={rounds}"]
    lim = [x["total_s"] for x in results.get("limit", [])]
    if lim:
        fields += [f"limit_s={med(lim):.1f}(+-{spread(lim):.1f})",
                   f"limit_startup_s={med(x['startup_s'] for x in results['limit']):.1f}",
                   f"limit_generation_s={med(x['generation_s'] for x in results['limit']):.1f}"]
    plan_s = None
    for arm in ("cold", "warm"):
        runs = results.get(arm) or []
        if not runs:
            continue
        walls = [w for w, _ in runs]
        print(f"\n{arm} run phases (median of {len(runs)} rounds, seconds; preprocess overlaps engine start):")
        for name, a, b in PHASES:
            got = [m[b] - m[a] for _, m in runs if a in m and b in m]
            if got:
                print(f"  {name:<13} {med(got):6.1f}")
                if arm == "warm" and name == "plan":
                    plan_s = med(got)
        print(f"  {'total':<13} {med(walls):6.1f}")
        fields.append(f"{arm}_s={med(walls):.1f}(+-{spread(walls):.1f})")
        if lim:
            fields.append(f"{arm}_over_limit={med(walls) / med(lim):.2f}")
    if results.get("serve"):
        second = [x["second_s"] for x in results["serve"]]
        fields.append(f"serve_second_s={med(second):.1f}(+-{spread(second):.1f})")
        fields.append(f"serve_engine_starts={results['serve'][-1]['engine_starts']}")
        if lim:
            gen = med(x["generation_s"] for x in results["limit"])
            if plan_s is not None:  # the target: the limit's generation plus the job's own plan (the warm run's)
                fields.append(f"serve_second_over_limit={med(second) / (gen + plan_s):.2f}")
            else:  # no warm arm in this sitting: no plan time to add, so say what the ratio is over
                fields.append(f"serve_second_over_generation={med(second) / gen:.2f}")
    if results.get("sweep"):
        sweep = results["sweep"]
        fields.append(f"sweep_s={med(sweep):.1f}(+-{spread(sweep):.1f})")
        if lim:
            fields.append(f"sweep_over_3x_limit={med(sweep) / (3 * med(lim)):.2f}")
    fields.append("load=" + "/".join(f"{x:.1f}" for x in os.getloadavg()))
    print("\nSUMMARY e2e " + " ".join(fields))


if __name__ == "__main__":
    main()
