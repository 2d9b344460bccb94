"""The transformers backend (`--backend hf`), batched against one request at a time, side by side in one run: requests
per second over the demo suite's questions, with the same greedy outputs asserted.

    PYTHONPATH=. .venv/bin/python perf/hf_batching.py [--models tiny-qwen2.5-vl,tiny-qwen3-vl] [--samples 2]
        [--max-tokens 16] [--batch 8] [--concurrency 16] [--repeats 2] [--device cpu|cuda]
        [--threads N] [--workdir DIR]

Per model: `--samples` questions of every demo benchmark, with the frames a run sends (decoded once into a frame
cache under --workdir, not timed), kept `--concurrency` in flight as the pipeline does (the default is the pipeline's
own, CONCURRENCY), through one loaded `HFBackend` whose `max_batch_size` is 1 (serial: the backend before batching)
or `--batch` (batched). The two arms alternate, `--repeats` times each after one untimed warm-up; the best time of
each counts (the machine is shared: the least disturbed run). Every arm's token ids, prompt and output token counts
and finish reasons must equal the serial ones, or the script fails. The tiny checkpoints have random weights: the
answers are nonsense, the work per token is real. Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from vbench_async.backends.base import CONCURRENCY, Completion, Request, SamplingParams, VideoInput  # noqa: E402


def demo_requests(model_name: str, cache_dir: Path, samples: int, sampling: SamplingParams) -> list[Request]:
    """The first `samples` questions of every demo benchmark, with their frames from the frame cache."""
    from vbench_async import models
    from vbench_async.benchmarks import resolve_benchmarks
    from vbench_async.frames import FrameCache

    model = models.resolve(model_name)
    out = []
    with FrameCache(cache_dir, workers=1) as frames:
        for bench in resolve_benchmarks("demo", None):
            spec = bench.frame_spec(model)
            for sample in bench.load_samples(None)[:samples]:
                v = frames.get_or_decode(bench.video_path(sample, None), spec, sample.window)
                video = VideoInput(v.frames, v.hf_metadata(), v.key)
                out.append(Request(sample.key, bench.render_prompt(sample), videos=(video,), sampling=sampling))
    return out


async def run_all(backend, requests: list[Request], concurrency: int) -> list[Completion]:
    """Every request, at most `concurrency` in flight (the pipeline's workers)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(r: Request) -> Completion:
        async with gate:
            return await backend.generate(r)

    return list(await asyncio.gather(*(one(r) for r in requests)))


def timed_arm(backend, requests: list[Request], batch: int, concurrency: int) -> tuple[float, list[Completion],
                                                                                       list[int]]:
    backend.max_batch_size = batch
    backend.batch_sizes.clear()
    t0 = time.perf_counter()
    done = asyncio.run(run_all(backend, requests, concurrency))
    return time.perf_counter() - t0, done, list(backend.batch_sizes)


def key(c: Completion) -> tuple:
    return c.token_ids, c.prompt_tokens, c.output_tokens, c.finish_reason


def measure(model_name: str, args, workdir: Path) -> dict:
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    requests = demo_requests(model_name, workdir / "cache", args.samples, SamplingParams(max_tokens=args.max_tokens))
    backend = HFBackend(str(ensure_tiny_model(model_name)), device=args.device)
    backend._load()
    arms = {"serial": 1, "batched": args.batch}
    warm = requests[: min(len(requests), args.batch)]
    for batch in arms.values():
        timed_arm(backend, warm, batch, args.concurrency)  # untimed: first calls pay one-off costs
    best: dict[str, float] = {}
    sizes: dict[str, list[int]] = {}
    reference = None
    for _ in range(max(1, args.repeats)):
        for arm, batch in arms.items():
            wall, done, batch_sizes = timed_arm(backend, requests, batch, args.concurrency)
            got = [key(c) for c in done]
            reference = reference or got
            if got != reference:
                bad = [r.request_id for r, a, b in zip(requests, got, reference) if a != b]
                raise SystemExit(f"{model_name}: the {arm} outputs differ from the serial ones for {bad}")
            print(f"{model_name} {arm}: {len(requests) / wall:.2f} requests/s ({wall:.1f} s, batches {batch_sizes})",
                  flush=True)
            if wall < best.get(arm, float("inf")):
                best[arm], sizes[arm] = wall, batch_sizes
    asyncio.run(backend.close())
    prompt = [c.prompt_tokens for c in done]
    return {"model": model_name, "requests": len(requests), "device": backend.device,
            "prompt_tokens_median": int(statistics.median(prompt)), "prompt_tokens_max": max(prompt),
            "output_tokens": sum(c.output_tokens for c in done), "wall": best, "sizes": sizes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="tiny-qwen2.5-vl,tiny-qwen3-vl")
    ap.add_argument("--samples", type=int, default=2, help="questions per demo benchmark (6 benchmarks)")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8, help="max_batch_size of the batched arm")
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY, help="requests in flight")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own); 1 steadies a busy machine")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-perf-hf-batching-"))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows = [measure(m, args, workdir) for m in args.models.split(",")]

    print(f"\n{'model':<18} {'arm':<8} {'requests':>8} {'best_s':>8} {'req/s':>7} {'batches':>8} {'mean_batch':>10} "
          f"{'speedup':>8}")
    for row in rows:
        serial = row["wall"]["serial"]
        for arm in ("serial", "batched"):
            wall, sizes = row["wall"][arm], row["sizes"][arm]
            print(f"{row['model']:<18} {arm:<8} {row['requests']:>8} {wall:>8.2f} {row['requests'] / wall:>7.2f} "
                  f"{len(sizes):>8} {statistics.mean(sizes):>10.2f} {serial / wall:>7.2f}x")
        print(f"{'':<18} prompt tokens median {row['prompt_tokens_median']}, max {row['prompt_tokens_max']}; "
              f"{row['output_tokens']} output tokens per arm")
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    per_model = " ".join(
        f"{r['model'].removeprefix('tiny-')}: serial_rps={r['requests'] / r['wall']['serial']:.2f} "
        f"batched_rps={r['requests'] / r['wall']['batched']:.2f} "
        f"speedup={r['wall']['serial'] / r['wall']['batched']:.2f}x" for r in rows)
    print(f"\nSUMMARY hf_batching device={rows[0]['device']} requests={rows[0]['requests']} "
          f"max_tokens={args.max_tokens} batch={args.batch} concurrency={args.concurrency} "
          f"threads={args.threads or 'default'} {per_model} "
          f"same_outputs=yes load={load}")


if __name__ == "__main__":
    main()
