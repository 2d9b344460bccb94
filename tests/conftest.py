"""Shared test setup: offline hub, quiet vLLM, a per-session home for tiny models and the demo suite."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# A suite started as a background job of a non-interactive shell (`make test &`, nohup, some CI runners) inherits
# SIGINT ignored, and so would every `vbench-async run` it starts: the Ctrl-C tests (and the interrupted demo run of
# `qwen25_runs`) would see the run ignore Ctrl-C and finish. A handler here makes the children start with SIGINT at
# its default (an exec resets handled signals, not ignored ones), as they would under a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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
# Every test that uses `qwen25_runs` carries ENGINE_GROUP, every other test that uses `vllm_server` SERVER_GROUP, so
# under `pytest -n N --dist loadgroup` each group runs on one worker and the runs are made once, the server once per
# group (session fixtures are per worker).
def wait_for_site(run_dir: Path, timeout: float = 600) -> Path:
    """The index.html of a run's own site, once the process that `run` left building it says it is done."""
    from vbench_async.results.rundir import site_log_path

    deadline = time.monotonic() + timeout
    log = site_log_path(run_dir)
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "leaderboard of" in text:
            return Path(run_dir) / "leaderboard" / "index.html"
        if "Traceback" in text or "vbench-async: error" in text:
            raise AssertionError(f"the run's site failed:\n{text[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no site for {run_dir} after {timeout} s")


ENGINE_GROUP = pytest.mark.xdist_group("engine")
# The tests that need `vllm_server` and not `qwen25_runs` run on another worker ("server"): the two engine-bound chains
# then overlap instead of queueing on one worker while the other runs out of work. The few tests that need both (the
# openai backend against the in-process run, the sharded runs against the unsharded one) stay in "engine", whose
# worker starts a server of its own for them.
SERVER_GROUP = pytest.mark.xdist_group("server")
# One decoder process per run: two pytest workers already fill the 2 cores, and each decoder process costs ~6 CPU-s
# of `import torch` to start.
DEMO_ARGS = ("--suite", "demo", "--max-tokens", "12", "--no-progress", "--workers", "1")


def demo_ids() -> dict[str, list[str]]:
    """Sample ids of every demo record, per benchmark (from the annotation files, not from a run)."""
    from vbench_async.benchmarks import resolve_benchmarks

    return {b.id: [s.sample_id for s in b.load_samples(None)] for b in resolve_benchmarks("demo", None)}


def outputs(run_dir: Path, field: str = "output") -> dict[str, object]:
    """`benchmark/sample_id` -> a field of each stored result."""
    from vbench_async.results.lines import read_lines

    res = {}
    for f in sorted((run_dir / "results").glob("*.jsonl")):
        for sid, r in read_lines(f).items():
            res[f"{r['benchmark']}/{sid}"] = r[field]
    return res


CACHE_BUDGET_GB = 0.0005  # 500 kB: about 4 of the demo suite's 22 Qwen2.5-VL entries (2.4 MB in all)


@pytest.fixture(scope="session")
def qwen25_runs(tmp_path_factory):
    """Tiny Qwen2.5-VL on the demo suite twice, greedy, with the real in-process vLLM engine.

    "a": one uninterrupted run on a cold cache (tmp/"cache") under a frame-cache budget far smaller than the suite's
    entries (CACHE_BUDGET_GB), so entries are evicted while it runs. "b": the same command on a cache of its own
    with no budget, killed
    during a cache write, stopped with Ctrl-C, its engine core killed, and re-run each time until it finished
    (tests/support/interruptions.py). The interrupted run is the second run, so "the two runs agree" and "an
    interrupted run ends as an uninterrupted one" are one comparison, and the suite pays for two runs, not five.
    Returns (tmp, the first run's process, the second run's Chain)."""
    from support.interruptions import interrupt_and_finish

    tmp = tmp_path_factory.mktemp("e2e")
    first = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(tmp / "a"),
                    "--cache-dir", str(tmp / "cache"), "--cache-max-gb", str(CACHE_BUDGET_GB))
    second = interrupt_and_finish(tmp / "b", tmp / "cache-b", tmp / "logs")
    return tmp, first, second


SERVED = "tiny-qwen2.5-vl"  # the name `vllm_server` serves its model under


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher_env() -> dict[str, str]:
    """This environment without a launcher's variables (torchrun sets its own), one thread per rank."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    return env


@pytest.fixture(scope="session")
def vllm_server():
    """vLLM's real OpenAI-compatible server on 127.0.0.1, serving tiny Qwen2.5-VL under its built-in name; yields its
    /v1 URL.

    Shared by the tests whose subject is not the in-process engine (the openai backend, the judge pass, sharding,
    real annotation formats): one engine start-up instead of one per test."""
    from vbench_async.demo.tiny_models import ensure_tiny_model

    with serve(ensure_tiny_model("tiny-qwen2.5-vl")) as url:
        yield url


@contextlib.contextmanager
def serve(model: Path, name: str = SERVED):
    """A vLLM OpenAI-compatible server for `model` under `name`, until the block ends; gives its /v1 URL."""
    port = free_port()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "8192", "--enforce-eager",
         "--limit-mm-per-prompt", '{"video": 1, "image": 1}', "--kv-cache-memory-bytes", str(64 << 20),
         "--served-model-name", name, "--trust-request-mm-kwargs"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 480
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited {proc.returncode}: {proc.stderr.read()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("vLLM server did not become healthy in time")
            time.sleep(1)
        yield url + "/v1"
    finally:
        stop(proc, 30)


def stop(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL if it is still there after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def served_args(url: str) -> tuple[str, ...]:
    """`vbench-async run` options that send the requests to `vllm_server` instead of an in-process engine."""
    return ("--backend", "openai", "--base-url", url, "--served-model", SERVED)


# -- one build per module-scoped fixture under --dist loadgroup ----------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group by module every test that uses a module- or session-scoped fixture of a test module (not of this file).

    `--dist loadgroup` hands out an ungrouped test alone, so the tests sharing such a fixture (a torchrun launch, an
    engine run, a tiny-model build, generated videos) would otherwise land on both workers and each worker would build
    it. Tests already in an xdist_group keep theirs (xdist joins several group names into a new one)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name) or ()
            if any(d.scope in ("module", "session") and d.baseid.endswith(".py") for d in defs):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
                break
