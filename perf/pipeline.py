"""Speed of the evaluation pipeline, measured side by side in one run (ratios; absolute times are noisy here).

On a generated suite (default 200 questions over 50 videos of 10-60 s, 4 questions per video, 1280x720 landscape and
portrait, the common resolution of benchmark videos; `--size sd` for 640x360-class ones):
  (a) whole command: `vbench-async run` with a warm cache vs perf/sync_baseline.py (engine start, inline decoding per
      question, fixed batches: how lmms-eval's vLLM backend works);
  (b) the evaluation loop vs the engine alone on the same inputs preloaded in memory, sent in the same order (the
      loop's own overhead), one engine; the engine alone in annotation order is printed beside it (what grouping
      the questions of a video together is worth);
  (c) whole command with a cold cache vs a warm cache.
Same tiny model, same engine settings, greedy, 16 new tokens. Ends with one SUMMARY line.
  (w) `--only writer`: the evaluation loop with result lines appended and fsynced and answers scored on the event
      loop (how it was) vs the writer thread and the scoring thread (how it is), interleaved, same questions, an
      engine that answers at once (what a fast GPU looks like to the loop): loop wall time, the event loop's worst
      and mean scheduling delay (a 1 ms ticker), and lines per fsync. No model needed.

Usage: .venv/bin/python perf/pipeline.py [--videos 50] [--questions-per-video 4] [--only b|writer]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = {  # decoding costs what it costs at the resolution benchmark videos have
    "hd": ((1280, 720), (720, 1280)),
    "sd": ((640, 360), (360, 640), (480, 270), (270, 480)),
}
# Few visual tokens per question: on a GPU the engine is fast next to decoding; on this CPU a tiny model still pays
# ~1 ms per prompt token, so a large frame budget would measure the CPU's matrix speed instead of the pipeline.
FRAMES = ("--max-frames", "16", "--max-pixels", "12544")


def sh(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def run_cmd(home: Path, out: Path, cache: Path, max_tokens: int) -> list[str]:
    return [sys.executable, "-m", "vbench_async", "run", "--model", "tiny-qwen2.5-vl", "--suite", "demo",
            "--output-dir", str(out), "--cache-dir", str(cache), "--max-tokens", str(max_tokens), "--no-progress",
            "--no-site", *FRAMES]


async def loop_vs_engine(home: Path, cache_dir: Path, max_tokens: int, concurrency: int) -> dict[str, float]:
    """(b): one engine; the engine alone on preloaded inputs vs the full loop (cache loads, scoring, fsynced lines)."""
    from vbench_async import models
    from vbench_async.backends.base import Request, SamplingParams, VideoInput
    from vbench_async.backends.vllm import VLLMBackend, VLLMSettings
    from vbench_async.benchmarks import resolve_benchmarks
    from vbench_async.evaluation.pipeline import Pipeline, PlanEntry, group_by_video
    from vbench_async.frames import FrameCache
    from vbench_async.results.result_file import ResultStore
    from vbench_async.scoring import score

    model = models.resolve("tiny-qwen2.5-vl")
    # Caches that would favour whichever pass runs second are off, so both passes do the same engine work.
    backend = VLLMBackend(model.path, VLLMSettings(max_num_seqs=concurrency, enable_prefix_caching=False,
                                                   mm_processor_cache_gb=0))
    await backend.start()
    cache = FrameCache(cache_dir)
    sampling = SamplingParams(max_tokens=max_tokens)
    entries, preloaded = [], {}
    tmp = Path(tempfile.mkdtemp())
    for bench in resolve_benchmarks("demo", None):
        spec = bench.frame_spec(model.family, {"max_frames": int(FRAMES[1]), "max_pixels": int(FRAMES[3])})
        store = ResultStore(tmp, bench.id, "perf")
        for s in bench.load_samples(None):
            video = bench.video_path(s, None)
            item = PlanEntry(sample=s, prompt=bench.render_prompt(s), store=store, video=video, spec=spec,
                             window=s.window)
            entries.append(item)
            cv = cache.get(video, spec, s.window)
            preloaded[s.key] = Request(request_id=s.key, prompt=item.prompt, sampling=sampling,
                                       videos=(VideoInput(cv.frames, cv.hf_metadata(), cv.key),))
    # The loop sends the questions of one video back to back (vLLM then reuses the video's encoder output). The engine
    # alone gets the same order, so the ratio is the loop's own overhead; annotation order is measured on the side.
    grouped = [preloaded[it.sample.key] for g in group_by_video(entries) for it in g.items]
    in_file_order = list(preloaded.values())

    async def engine_alone(tag: str, requests: list[Request]) -> float:
        sem = asyncio.Semaphore(concurrency)

        async def one(r: Request):
            async with sem:
                return await backend.generate(Request(**{**r.__dict__, "request_id": f"{tag}-{r.request_id}"}))

        t0 = time.perf_counter()
        await asyncio.gather(*(one(r) for r in requests))
        return time.perf_counter() - t0

    async def full_loop(tag: str) -> float:
        stores: dict[str, ResultStore] = {}
        for item, *_ in entries:  # one store (one locked file) per benchmark, as the runner has
            bid = item.store.benchmark_id
            item.store = stores.setdefault(bid, ResultStore(tmp / tag, bid, "perf"))
        stores = stores.values()
        for s in stores:
            s.open()
        pipe = Pipeline(backend, cache.get_or_decode, lambda p: None, score, sampling, concurrency=concurrency)
        t0 = time.perf_counter()
        await pipe.run(group_by_video(entries))
        wall = time.perf_counter() - t0
        for s in stores:
            s.close()
        return wall

    await engine_alone("warmup", grouped)
    times = {"engine": [], "loop": [], "engine_file_order": []}
    for rep in range(2):  # interleaved, so drift in machine load hits all alike
        times["engine"].append(await engine_alone(f"e{rep}", grouped))
        times["loop"].append(await full_loop(f"l{rep}"))
        times["engine_file_order"].append(await engine_alone(f"f{rep}", in_file_order))
    await backend.close()
    return {k: min(v) for k, v in times.items()}


class InlineWriter:
    """The old path, for comparison only: append and fsync each line on the event loop."""

    lines = fsyncs = 0

    def __enter__(self) -> InlineWriter:
        return self

    def __exit__(self, *exc) -> None:
        pass

    async def write(self, store, result) -> None:
        store.append(result)
        self.lines += 1
        self.fsyncs += 1


class InlineExecutor(concurrent.futures.Executor):
    """Runs what is submitted at once, in the caller's thread: scoring on the event loop, as it was."""

    def submit(self, fn, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
            future.set_exception(exc)
        return future


def writer_side_by_side(work: Path, questions: int, concurrency: int, reps: int = 3) -> dict[str, dict]:
    """(w): the same loop with the old inline writer and scorer, and with the threads; best of `reps` each."""
    from vbench_async.backends.base import SamplingParams
    from vbench_async.benchmarks import get_benchmark, score_sample
    from vbench_async.evaluation.pipeline import Pipeline, PlanEntry, group_by_video
    from vbench_async.results.result_file import ResultStore
    from vbench_async.samples import Sample

    sys.path.insert(0, str(REPO / "perf"))
    from memory import InstantBackend  # answers at once: the loop's own costs, not an engine's

    bench = get_benchmark("mmvu")
    samples = [Sample(benchmark="mmvu", sample_id=f"q{i:06d}", task_type="multiple choice",
                      question=f"[{i}] Which colour is the square?", options=["A. red", "B. green", "C. blue"],
                      answer="A") for i in range(questions)]

    class Inline(Pipeline):
        writer = InlineWriter
        scorer = staticmethod(InlineExecutor)

    async def one(cls, out: Path) -> dict:
        store = ResultStore(out, "mmvu", "perf")
        entries = [PlanEntry(s, bench.render_prompt(s), store) for s in samples]
        lags: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:  # how late the loop runs a 1 ms timer: the time it spent not scheduling
            while not done.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - t - 0.001)

        pipe = cls(InstantBackend(), None, lambda p: None, score_sample, SamplingParams(), concurrency=concurrency)
        with store:
            tick = asyncio.create_task(ticker())
            t0 = time.perf_counter()
            stats = await pipe.run(group_by_video(entries))
            wall = time.perf_counter() - t0
            done.set()
            await tick
        assert stats.n_done == questions and stats.n_failed == 0
        return {"wall_s": wall, "max_lag_ms": 1000 * max(lags), "mean_lag_ms": 1000 * sum(lags) / len(lags),
                "lines_per_fsync": stats.lines_per_fsync or 1.0}

    results: dict[str, list[dict]] = {"inline": [], "threads": []}
    for rep in range(reps):  # interleaved, so drift in machine load hits both alike
        results["inline"].append(asyncio.run(one(Inline, work / f"inline-{rep}")))
        results["threads"].append(asyncio.run(one(Pipeline, work / f"threads-{rep}")))
    return {k: min(v, key=lambda r: r["wall_s"]) for k, v in results.items()}


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # progress lines appear as they are measured
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=int, default=50)
    ap.add_argument("--questions-per-video", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--size", choices=sorted(SIZES), default="hd", help="video resolutions of the generated suite")
    ap.add_argument("--work-dir", type=Path, help="reuse this folder (its generated suite) instead of a new one")
    ap.add_argument("--only", choices=["b", "writer"], help="run only part (b), on a work dir whose cache is warm, "
                                                            "or only (w)")
    ap.add_argument("--writer-questions", type=int, default=2000, help="questions for (w)")
    args = ap.parse_args()
    if args.only == "writer":
        work = args.work_dir or Path(tempfile.mkdtemp(prefix="vbench-perf-writer-"))
        w = writer_side_by_side(work, args.writer_questions, args.concurrency)
        for name, r in w.items():
            print(f"(w) {name:7}: {r['wall_s']:.2f} s for {args.writer_questions} questions "
                  f"({args.writer_questions / r['wall_s']:.0f} q/s), event loop delay max {r['max_lag_ms']:.1f} ms "
                  f"mean {r['mean_lag_ms']:.2f} ms, {r['lines_per_fsync']:.1f} lines per fsync")
        i, t = w["inline"], w["threads"]
        print(f"SUMMARY writer questions={args.writer_questions} concurrency={args.concurrency} "
              f"inline_fsync_s={i['wall_s']:.2f} writer_thread_s={t['wall_s']:.2f} "
              f"speedup={i['wall_s'] / t['wall_s']:.2f}x "
              f"loop_delay_max_ms={i['max_lag_ms']:.1f}->{t['max_lag_ms']:.1f} "
              f"loop_delay_mean_ms={i['mean_lag_ms']:.2f}->{t['mean_lag_ms']:.2f} "
              f"lines_per_fsync={i['lines_per_fsync']:.1f}->{t['lines_per_fsync']:.1f}")
        return

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="vbench-perf-"))
    home = work / "home"
    os.environ["VBENCH_ASYNC_HOME"] = str(home)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    env = {**os.environ}
    from vbench_async.demo.suite import SUITE_VERSION, generate_suite

    # The generated suite stands in for the built-in demo suite inside this private home.
    t0 = time.perf_counter()
    suite_dir = home / "suites" / f"demo-v{SUITE_VERSION}"
    if (suite_dir / "annotations").is_dir():
        counts = {f.stem: len(json.loads(f.read_text())) for f in (suite_dir / "annotations").glob("*.json")}
    else:
        counts = generate_suite(suite_dir, n_videos=args.videos, questions_per_video=args.questions_per_video,
                                seed=1, min_s=10, max_s=60, sizes=SIZES[args.size])
    n = sum(counts.values())
    print(f"suite: {n} questions over {args.videos} videos of 10-60 s, {args.size} "
          f"({time.perf_counter() - t0:.0f} s to prepare)")

    cache = work / "cache"
    if args.only == "b":
        b = asyncio.run(loop_vs_engine(home, cache, args.max_tokens, args.concurrency))
        overhead = b["loop"] / b["engine"]
        print(f"(b) engine alone on preloaded inputs: {b['engine']:.2f} s; full loop: {b['loop']:.2f} s; engine "
              f"alone in annotation order (questions of a video not together): {b['engine_file_order']:.2f} s")
        print(f"SUMMARY questions={n} loop_overhead={overhead:.3f}x")
        os._exit(0)
    for stale in ("cold", "warm", "cache"):  # a reused work dir starts cold again
        subprocess.run(["rm", "-rf", str(work / stale)], check=True)
    cold, _ = sh(run_cmd(home, work / "cold", cache, args.max_tokens), env)
    print(f"(c) cold cache, whole command: {cold:.1f} s")
    warm, _ = sh(run_cmd(home, work / "warm", cache, args.max_tokens), env)
    print(f"    warm cache, whole command: {warm:.1f} s   cold/warm = {cold / warm:.2f}x")
    base, out = sh([sys.executable, str(REPO / "perf" / "sync_baseline.py"), "--max-tokens", str(args.max_tokens),
                    *FRAMES], env)
    detail = json.loads(out.strip().splitlines()[-1])
    print(f"(a) synchronous baseline, whole command: {base:.1f} s (decode {detail['decode_s']:.1f} s, engine "
          f"{detail['engine_s']:.1f} s)   baseline/warm = {base / warm:.2f}x")
    warm_summary = json.loads((work / "warm" / "summary.json").read_text())
    loop = warm_summary["run"]["loop"]
    print(f"    warm run: start-up {warm_summary['run'].get('startup_s')} s, {loop['samples_per_s']} q/s, "
          f"queue empty {loop['queue_empty_fraction']:.0%} of gets")

    b = asyncio.run(loop_vs_engine(home, cache, args.max_tokens, args.concurrency))
    overhead = b["loop"] / b["engine"]
    print(f"(b) engine alone on preloaded inputs: {b['engine']:.2f} s; full loop: {b['loop']:.2f} s   "
          f"loop/engine = {overhead:.3f}x (engine alone in annotation order: {b['engine_file_order']:.2f} s)")
    print(f"SUMMARY questions={n} videos={args.size} sync_baseline_vs_warm={base / warm:.2f}x "
          f"loop_overhead={overhead:.3f}x cold_vs_warm={cold / warm:.2f}x")
    os._exit(0)


if __name__ == "__main__":
    main()
