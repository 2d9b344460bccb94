"""Shared test setup: offline hub, quiet vLLM, a per-session home for tiny models and the demo suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CACHE_ROOT", str(Path.home() / ".cache" / "vbench-async" / "vllm-test-cache"))


def shared_dir(*parts: str) -> Path:
    """A path under ../shared, or skip the test where that reference material is absent (users don't have it)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference material {path} is not available")
    return path


def run_cli(*args: str, env: dict | None = None, timeout: float = 600, cwd: Path | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run `vbench-async ARGS` in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "vbench_async", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd or REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"vbench-async {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")
    return proc


# -- the demo suite through the real engine, shared by several test files ------------------------------------------
DEMO_ARGS = ("--suite", "demo", "--max-tokens", "12", "--no-progress")


def demo_ids() -> dict[str, list[str]]:
    """Sample ids of every demo record, per benchmark (from the annotation files, not from a run)."""
    from vbench_async.benchmarks import resolve_benchmarks

    return {b.id: [s.sample_id for s in b.load_samples(None)] for b in resolve_benchmarks("demo", None)}


def outputs(run_dir: Path, field: str = "output") -> dict[str, object]:
    """`benchmark/sample_id` -> a field of each stored result."""
    from vbench_async.results.store import read_results

    res = {}
    for f in sorted((run_dir / "results").glob("*.jsonl")):
        for sid, r in read_results(f).items():
            res[f"{r['benchmark']}/{sid}"] = r[field]
    return res


@pytest.fixture(scope="session")
def qwen25_runs(tmp_path_factory):
    """Two greedy runs of tiny Qwen2.5-VL on the demo suite: a cold cache, then the same command into a new dir."""
    tmp = tmp_path_factory.mktemp("e2e")
    cache = tmp / "cache"
    first = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(tmp / "a"),
                    "--cache-dir", str(cache))
    second = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(tmp / "b"),
                     "--cache-dir", str(cache))
    return tmp, first, second
