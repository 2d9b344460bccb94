"""Ablations: does each part of the input reach the model? A model on the demo suite, with every ablation, through
every backend. Only a model that answers from the pixels gives a signal (random-weight tiny models do not; see
docs/seeing-models.md for the seeing models in progress).

For each model given (a model directory or hub id whose family the demo cards support) and each backend (the
in-process vLLM engine, vLLM's OpenAI server through `--backend openai`, transformers through `--backend hf`), the
demo's choice, yes/no and counting benchmarks are evaluated with the real
frames and with each ablation of `run --ablation` (frames blanked, shuffled, reversed; fps doubled; timestamps lost).
A model that sees scores above chance on the real frames and falls to chance with blank frames; reversed frames flip
its answers about the direction of motion (the "motion" questions fall below chance).

Runs go through `vbench_async.runner.run`, each ablation a run of its own in WORKDIR/<model>/<backend>/<ablation>,
all of one model and backend on one engine (`sweep.run_on_one_engine`), and the vLLM server once per model.

    PYTHONPATH=. .venv/bin/python perf/ablations.py --models DIR[,DIR] [--backends vllm,openai,hf] [--workdir DIR]

Prints one table per model and backend (headline per benchmark, and the motion questions' accuracy), then one
SUMMARY line: per model and backend, the mean score over the benchmarks with real frames and with each ablation.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
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

BENCHMARKS = ("demo-mc", "demo-yesno", "demo-count")
ABLATION_ORDER = (None, "blank", "shuffle", "reverse", "fps", "timestamps")


def motion_accuracy(run_dir: Path) -> float | None:
    """Mean score of the motion questions (direction of motion: they need the frames in order) over the run's lines."""
    scores = []
    for path in sorted((run_dir / "results").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if (r.get("fields") or {}).get("category") == "motion":
                scores.append(float(r.get("score") or 0.0))
    return sum(scores) / len(scores) if scores else None


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
    """Every ablation of one model on one backend (one engine); {ablation: {benchmark: score, "motion": acc}}."""
    from vbench_async import models
    from vbench_async.backends.base import SamplingParams
    from vbench_async.backends.openai import ServerSettings
    from vbench_async.backends.vllm import VLLMSettings
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.run_config import RunConfig
    from vbench_async.sweep import run_on_one_engine

    base = RunConfig(model=model, selection=Selection(benchmarks=BENCHMARKS), backend=backend,
                     sampling=SamplingParams(max_tokens=8), cache_dir=workdir / "cache", progress=False, site=False,
                     engine=VLLMSettings(),
                     server=ServerSettings(base_url=base_url, served_model="seeing") if base_url else ServerSettings())
    cfgs = [dataclasses.replace(base, ablation=a, output_dir=workdir / Path(model).name / backend / (a or "frames"))
            for a in ABLATION_ORDER]
    ref = models.resolve(model)
    summaries = run_on_one_engine(cfgs, ref.path, [0] * len(cfgs), None,
                                  lambda run_dir: contextlib.nullcontext(), ref)
    out: dict[str | None, dict[str, Any]] = {}
    for a, cfg, summary in zip(ABLATION_ORDER, cfgs, summaries):
        row: dict[str, Any] = {b: (summary["benchmarks"].get(b) or {}).get("score") for b in BENCHMARKS}
        row["motion"] = motion_accuracy(Path(cfg.output_dir))
        out[a] = row
    return out


def table(model: str, backend: str, rows: dict[str | None, dict[str, Any]]) -> str:
    cols = (*BENCHMARKS, "motion")
    lines = [f"\n{model} / {backend}", f"{'input':<12}" + "".join(f"{c:>12}" for c in cols)]
    for a, row in rows.items():
        cells = "".join(f"{row[c] * (100 if c == 'motion' else 1):>12.1f}" if row[c] is not None else f"{'-':>12}"
                        for c in cols)
        lines.append(f"{a or 'frames':<12}{cells}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", required=True, help="comma-separated model directories (or hub ids)")
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
            motion = {a or "frames": None if r["motion"] is None else round(100 * r["motion"], 1)
                      for a, r in rows.items()}
            parts.append(f"{model}/{backend}:mean=" + "/".join(f"{k}:{v}" for k, v in mean.items())
                         + ",motion=" + "/".join(f"{k}:{v}" for k, v in motion.items()))
    print("SUMMARY ablations " + " ".join(parts))


if __name__ == "__main__":
    main()
