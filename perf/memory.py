"""Bounded memory of the evaluation HARNESS: peak RSS of `runner.run` streaming 100,000 questions through planning,
frame loading (preprocessing), scheduling, scoring, result writing and aggregation, against the same for 10,000;
and how long planning takes at each size (`runner._plan_benchmark` for every benchmark plus the workload plan:
annotation parsing, prompt rendering, the chat template, tokenizing, video headers).

What is measured is the harness, not the engine: the backend in this script answers every request at once with a
fixed text (`InstantBackend`, defined here; perf/pipeline.py reuses it), so the numbers are the pipeline's own
memory: samples, work items, the bounded frame queue, result lines, summaries. Engine memory does not depend on the
suite size (its KV cache is fixed at start-up). Each size runs in a fresh interpreter; the RSS is the process's peak
(ru_maxrss), and "growth" is its relative increase from the small suite to the large one (target: < 20%).

The suites are records pointing at a few small generated videos (many questions per video, as real benchmarks have),
all through the real code of `vbench-async run` (`runner.run`) with the built-in tiny Qwen2.5-VL model's settings.

Two figures: the harness alone (a fresh interpreter with only vbench-async imported: the strict measure, growth over
a 42 MB base), and the run process as `vbench-async run --backend vllm` has it before its engine allocates anything
(vLLM's AsyncLLM imported: the base a user's process really starts from). Same suites, same code, same peak reading.

    PYTHONPATH=. .venv/bin/python perf/memory.py [--small 10000] [--large 100000] [--videos 8] [--workdir DIR]
        [--no-engine-imports]

Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

TARGET = 0.20


def build_suite(folder: Path, n_questions: int, template: list[dict]) -> Path:
    """`n_questions` records cycling over the template questions (and so over their videos); returns a data map."""
    from support.hostile import unified_suite  # the data map the reliability tests use

    records = []
    for i in range(n_questions):
        rec = dict(template[i % len(template)])
        rec["problem_id"] = f"q{i:05d}"
        rec["problem"] = f"[{i}] {rec['problem']}"  # every prompt differs, as in a real benchmark
        records.append(rec)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "videos").is_symlink():  # a --workdir kept from an earlier invocation has it
        (folder / "videos").symlink_to(folder.parent / "videos")  # every suite shares the same few videos
    return unified_suite(folder, records)


class InstantBackend:
    """Answers at once, without a model: isolates the harness's memory (and, in perf/pipeline.py's writer comparison,
    the loop's own costs). Only for these measurements."""

    name = "instant (harness only, no model)"

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def describe(self) -> dict:
        return {"backend": self.name}

    async def generate(self, request):
        from vbench_async.backends.base import Completion

        return Completion(text="<answer>A</answer>", prompt_tokens=len(request.prompt) // 4, output_tokens=5)


def _status_mb(field: str) -> float:
    """VmRSS / VmHWM of this process in MB. VmHWM is the peak of this program image only: unlike ru_maxrss, it does
    not start at the size of the parent that forked it."""
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith(f"{field}:"))
    return round(kb / 1024, 1)


def _phase(marks: dict[str, float], name: str, fn):
    """Wrap `fn` so the process's peak RSS is noted when it returns (the peak so far, phase by phase)."""
    def wrapped(*args, **kwargs):
        result = fn(*args, **kwargs)
        marks[name] = _status_mb("VmHWM")
        return result
    return wrapped


def child(data_map: Path, out: Path, cache: Path, engine_imports: bool) -> dict:
    """One measured run, in this (fresh) interpreter."""
    if engine_imports:
        import vllm.v1.engine.async_llm  # noqa: F401  (what the vllm backend's start() imports)
    import vbench_async.benchmarks  # noqa: F401  (the modules a run imports, so "after imports" means it)
    import vbench_async.frames  # noqa: F401
    import vbench_async.scoring  # noqa: F401
    from vbench_async.backends.sampling_overrides import SamplingOverrides
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.execute import execute as evaluation
    from vbench_async.evaluation.execute import runner
    from vbench_async.frames.frame_settings import FrameSettings
    from vbench_async.results import summaries

    evaluation._make_backend = lambda cfg, model, plans, *rest: InstantBackend()  # the one substitution: no engine
    # Peaks by phase: planning (samples, prompts, paths) ends where evaluation starts; the loop; the summary.
    peaks: dict[str, float] = {"imports": _status_mb("VmHWM")}
    runner._plan_benchmark = _phase(peaks, "plan", runner._plan_benchmark)
    plan_s: list[float] = []
    runner._run_locked = _timed_plan(runner._run_locked, plan_s)
    runner.execute = _phase(peaks, "loop", runner.execute)
    summaries.write_run_outputs = _phase(peaks, "report", summaries.write_run_outputs)
    t0 = time.perf_counter()
    summary = runner.run(runner.RunConfig(
        model="tiny-qwen2.5-vl", selection=Selection(benchmarks=("mmvu",), data_root=data_map), output_dir=out,
        cache_dir=cache, sampling=SamplingOverrides(max_tokens=8),
        frame_overrides=FrameSettings(max_frames=8, max_pixels=65536),
        progress=False, mode="both", queue_size=32,  # requests in flight: the run's default (up to 1,024 here)
    ))
    bench = summary.benchmarks["mmvu"]
    return {"questions": bench.n_total, "failed": bench.n_failed, "wall_s": round(time.perf_counter() - t0, 2),
            "plan_s": plan_s[0] if plan_s else None, "plan_cpu_s": plan_s[1] if plan_s else None,
            "peak_rss_mb": _status_mb("VmHWM"), "peak_by_phase_mb": peaks}


def _timed_plan(run_locked, out: list[float]):
    """Time from the start of the run (annotations loaded) to its plan being printed (`on_plan`): the whole plan."""
    def wrapped(cfg, model, run_dir, t_start, on_plan, *rest, **kw):
        t0, c0 = time.perf_counter(), time.process_time()

        def noted(*args):
            out.extend([round(time.perf_counter() - t0, 2), round(time.process_time() - c0, 2)])
            if on_plan is not None:
                on_plan(*args)
        return run_locked(cfg, model, run_dir, t_start, noted, *rest, **kw)
    return wrapped


def measure(data_map: Path, out: Path, cache: Path, engine_imports: bool = False) -> dict:
    flag = ["--engine-imports"] if engine_imports else []
    proc = subprocess.run([sys.executable, __file__, "--child", str(data_map), str(out), str(cache), *flag],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"measured run failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=10000, help="questions in the reference suite")
    ap.add_argument("--large", type=int, default=100000, help="questions in the large suite")
    ap.add_argument("--no-engine-imports", action="store_true", help="skip the runs with vLLM imported")
    ap.add_argument("--videos", type=int, default=8, help="distinct videos the questions point at")
    ap.add_argument("--workdir", type=Path, help="keep the generated suites and runs here (default: a temp dir)")
    ap.add_argument("--child", nargs=3, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--engine-imports", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, engine_imports=args.engine_imports)))
        return 0

    from vbench_async.demo.suite import generate_suite

    work = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-memory-"))
    generate_suite(work / "template", n_videos=args.videos, questions_per_video=3, seed=3, min_s=2.0, max_s=8.0)
    files = sorted((work / "template" / "annotations").glob("*.json"))
    template = [r for f in files for r in json.loads(f.read_text())]
    if not (work / "videos").is_symlink():
        (work / "videos").symlink_to(work / "template" / "videos")
    rows: dict[tuple[int, bool], dict] = {}
    for engine_imports in (False,) if args.no_engine_imports else (False, True):
        for n in (args.small, args.large):
            data_map = build_suite(work / f"suite-{n}", n, template) if not engine_imports else \
                work / f"suite-{n}" / "data-map.yaml"
            tag = f"{n}{'-vllm' if engine_imports else ''}"
            # a cold cache and a fresh run directory for each run (a kept --workdir has the last ones): all
            # preprocess the same videos, so only the question count differs
            for old in (work / f"run-{tag}", work / f"cache-{tag}"):
                shutil.rmtree(old, ignore_errors=True)
            rows[n, engine_imports] = measure(data_map, work / f"run-{tag}", work / f"cache-{tag}", engine_imports)
            print(f"{n:>6} questions{' (vLLM imported)' if engine_imports else ''}: "
                  f"{json.dumps(rows[n, engine_imports])}", flush=True)
    small, large = rows[args.small, False], rows[args.large, False]
    growth = large["peak_rss_mb"] / small["peak_rss_mb"] - 1
    small_v, large_v = rows.get((args.small, True)), rows.get((args.large, True))
    growth_v = large_v["peak_rss_mb"] / small_v["peak_rss_mb"] - 1 if large_v else None
    ok = max(growth, growth_v or 0) < TARGET and all(r["failed"] == 0 for r in rows.values())
    added = {k: large["peak_by_phase_mb"][k] - small["peak_by_phase_mb"][k] for k in ("plan", "loop", "report")}
    per_q = (large["peak_rss_mb"] - small["peak_rss_mb"]) / (args.large - args.small) * 1024
    with_vllm = (f"run process with vLLM imported {small_v['peak_rss_mb']:.0f} -> {large_v['peak_rss_mb']:.0f} MB "
                 f"(growth {100 * growth_v:+.1f}%)") if large_v else "vLLM-imported runs skipped"
    print(f"SUMMARY memory: {args.small} questions: plan {small['plan_s']} s ({small['plan_cpu_s']} s CPU), peak RSS "
          f"{small['peak_rss_mb']:.0f} MB; {args.large} questions: plan {large['plan_s']} s ({large['plan_cpu_s']} s "
          f"CPU), peak RSS {large['peak_rss_mb']:.0f} MB "
          f"(harness alone, growth {100 * growth:+.1f}%); {with_vllm}; "
          f"target < {100 * TARGET:.0f}%: {'PASS' if ok else 'FAIL'}; {per_q:.1f} KB per extra question; peak by "
          f"phase, large minus small: plan {added['plan']:+.0f} MB, loop {added['loop']:+.0f} MB, "
          f"report {added['report']:+.0f} MB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
