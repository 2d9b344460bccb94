"""What the evaluation server saves a training loop: the wall time of a job sent to a warm `vbench-async serve` (its
engine kept from an earlier job) against a fresh `vbench-async run` of the same work, side by side in this run.

The same model, benchmarks, frames, sampling and frame cache (filled by the first job, so neither side decodes);
each side writes its own new run directory, so both evaluate every sample. The fresh run's time is its process's
wall time (what a training loop calling the CLI per checkpoint pays: imports, engine start-up, evaluation); the
job's is from submission to its result, as the client sees it.

    PYTHONPATH=. .venv/bin/python perf/serve.py [--model tiny-qwen2.5-vl] [--benchmarks demo-mc,demo-yesno]

Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from vbench_async.serve import client  # noqa: E402


def start_serve(model: str, cache: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "vbench_async", "serve", "--model", model, "--port", "0",
                             "--cache-dir", str(cache), "--workers", "1",
                             "--output-root", str(cache.parent)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    match = re.search(r"on (http://127\.0\.0\.1:\d+)", proc.stdout.readline())
    if not match:
        proc.kill()
        raise SystemExit("serve did not start")
    return proc, match.group(1)


def job(url: str, model: str, benchmarks: list[str], out: Path, max_tokens: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    record = client.submit(url, {"model": model, "benchmarks": benchmarks, "sampling": {"max_tokens": max_tokens},
                                 "output_dir": str(out)})
    record = client.wait(url, record["id"], poll_s=0.1)
    if record["status"] != "done":
        raise SystemExit(f"job {record['id']} {record['status']}: {record.get('error')}")
    return time.perf_counter() - t0, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny-qwen2.5-vl")
    ap.add_argument("--benchmarks", default="demo-mc,demo-yesno")
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="perf-serve-"))
    benchmarks = args.benchmarks.split(",")
    proc, url = start_serve(args.model, work / "cache")
    try:
        first_s, _ = job(url, args.model, benchmarks, work / "job1", args.max_tokens)
        second_s, second = job(url, args.model, benchmarks, work / "job2", args.max_tokens)
        starts = client.health(url)["engine_starts"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    t0 = time.perf_counter()
    fresh = subprocess.run([sys.executable, "-m", "vbench_async", "run", "--model", args.model, "--benchmarks",
                            args.benchmarks, "--max-tokens", str(args.max_tokens), "--output-dir", str(work / "fresh"),
                            "--cache-dir", str(work / "cache"), "--workers", "1", "--no-progress", "--no-site"],
                           cwd=ROOT, capture_output=True, text=True)
    fresh_s = time.perf_counter() - t0
    if fresh.returncode != 0:
        raise SystemExit(f"fresh run failed: {fresh.stderr[-2000:]}")
    n = sum(b["n_total"] for b in second["summary"]["benchmarks"].values())
    print(f"first job (engine start-up included): {first_s:.1f} s; second job: {second_s:.1f} s "
          f"(server-side {second['wall_s']:.1f} s); fresh run: {fresh_s:.1f} s; engine starts: {starts}")
    print(f"SUMMARY serve samples={n} second_job_s={second_s:.1f} fresh_run_s={fresh_s:.1f} "
          f"fresh_over_second={fresh_s / second_s:.1f}x engine_starts={starts}")


if __name__ == "__main__":
    main()
