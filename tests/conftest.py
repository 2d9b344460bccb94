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
