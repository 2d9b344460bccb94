"""Ablations: does each part of the input reach the model? The seeing models on the seeing suite, with every
ablation, through every backend.

For each model (default: both seeing models, `seeing-qwen2.5-vl` and `seeing-qwen3-vl`) and each backend (the
in-process vLLM engine, vLLM's OpenAI server through `--backend openai`, transformers through `--backend hf`), the
seeing suite is evaluated with the real frames and with each ablation of `run --ablation` (frames blanked, shuffled,
reversed; fps doubled; timestamps lost). A model that sees scores above chance on the real frames and falls to chance
with blank frames; reversed frames flip its answer to "when are the shapes shown" (seeing-when falls below chance).

Runs go through `vbench_async.evaluation.runner.run`, each ablation a run of its own in
WORKDIR/<model>/<backend>/<ablation>, all of one model and backend on one engine (`sweep.run_on_one_engine`), and the
vLLM server once per model.

    PYTHONPATH=. .venv/bin/python perf/ablations.py [--models NAME_OR_DIR,...] [--backends vllm,openai,hf]

Prints one table per model and backend (accuracy in % per benchmark and input), then one SUMMARY line: per model
and backend, the mean score over the benchmarks with real frames and with each ablation, and seeing-when's.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BENCHMARKS = ("seeing-color", "seeing-count", "seeing-size", "seeing-when")
ABLATION_ORDER = (None, "blank", "shuffle", "reverse", "fps", "timestamps")


@contextlib.contextmanager
def vllm_server(model_path: str) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path, "--host", "127.0.0.1",
         "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "8192", "--enforce-eager",
         "--limit-mm-per-prompt", '{"video": 1, "image": 1}', "--kv-cache-memory-bytes", str(64 << 20),
         "--served-model-name", "seeing", "--trust-request-mm-kwargs"],
        env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the vLLM server did not start in 600 s")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_all(model: str, backend: str, workdir: Path, base_url: str | None) -> dict[str | None, dict[str, Any]]:
    """Every ablation of one model on one backend (one engine); {ablation: {benchmark: score in %}}."""
    from vbench_async.backends.openai import ServerSettings
    from vbench_async.backends.sampling_overrides import SamplingOverrides
    from vbench_async.backends.vllm import VLLMSettings
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.run_config import RunConfig, resolve_run
    from vbench_async.evaluation.sweep import run_on_one_engine

    base = RunConfig(model=model, selection=Selection(benchmarks=BENCHMARKS), backend=backend,
                     sampling=SamplingOverrides(max_tokens=8), cache_dir=workdir / "cache", progress=False, site=False,
                     engine=VLLMSettings(),
                     server=ServerSettings(base_url=base_url, served_model="seeing") if base_url else ServerSettings())
    cfgs = [dataclasses.replace(base, ablation=a, output_dir=workdir / Path(model).name / backend / (a or "frames"))
            for a in ABLATION_ORDER]
    summaries = run_on_one_engine(cfgs, [0] * len(cfgs), None, lambda run_dir: contextlib.nullcontext(),
                                  resolve_run(base))
    out: dict[str | None, dict[str, Any]] = {}
    for a, summary in zip(ABLATION_ORDER, summaries):
        scores = {b: block.score if (block := summary.benchmarks.get(b)) is not None else None for b in BENCHMARKS}
        out[a] = {b: None if v is None else 100 * v for b, v in scores.items()}
    return out


def table(model: str, backend: str, rows: dict[str | None, dict[str, Any]]) -> str:
    lines = [f"\n{model} / {backend}", f"{'input':<12}" + "".join(f"{c:>14}" for c in BENCHMARKS)]
    for a, row in rows.items():
        cells = "".join(f"{row[c]:>14.1f}" if row[c] is not None else f"{'-':>14}" for c in BENCHMARKS)
        lines.append(f"{a or 'frames':<12}{cells}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="seeing-qwen2.5-vl,seeing-qwen3-vl",
                    help="comma-separated model names, directories or hub ids")
    ap.add_argument("--backends", default="vllm,openai,hf")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vbench-ablations-"))
    parts = []
    for model in args.models.split(","):
        from vbench_async import models

        path = models.resolve(model).path
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            if backend == "openai":
                with vllm_server(path) as url:
                    rows = run_all(model, backend, workdir, url)
            else:
                rows = run_all(model, backend, workdir, None)
            print(table(model, backend, rows), f"\n({time.perf_counter() - t0:.0f} s)", flush=True)
            mean = {a or "frames": round(sum(r[b] or 0.0 for b in BENCHMARKS) / len(BENCHMARKS), 1)
                    for a, r in rows.items()}
            when = {a or "frames": None if r["seeing-when"] is None else round(r["seeing-when"], 1)
                    for a, r in rows.items()}
            parts.append(f"{model}/{backend}:mean=" + "/".join(f"{k}:{v}" for k, v in mean.items())
                         + ",when=" + "/".join(f"{k}:{v}" for k, v in when.items()))
    print("SUMMARY ablations " + " ".join(parts))


if __name__ == "__main__":
    main()
