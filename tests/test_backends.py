"""The openai backend against vLLM's real OpenAI-compatible server on 127.0.0.1, and the transformers backend.

Both must see exactly the frames and metadata the in-process engine sees: the prompt token counts (video tokens and
Qwen3-VL timestamps included) must equal those of the in-process vLLM run on the same samples.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import outputs, run_cli
from vbench_async.demo.tiny_models import ensure_tiny_model

pytestmark = pytest.mark.vllm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server():
    model = ensure_tiny_model("tiny-qwen2.5-vl")
    port = _free_port()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "8192", "--enforce-eager",
         "--limit-mm-per-prompt", '{"video": 1, "image": 1}', "--kv-cache-memory-bytes", str(64 << 20),
         "--served-model-name", "tiny", "--trust-request-mm-kwargs"],
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
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_openai_backend_matches_in_process_engine(vllm_server, qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    proc = run_cli("run", "--backend", "openai", "--base-url", vllm_server, "--served-model", "tiny",
                   "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc,demo-tg", "--max-tokens", "12",
                   "--no-progress", "--output-dir", str(tmp_path / "srv"), "--cache-dir", str(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    served = outputs(tmp_path / "srv", "prompt_tokens")
    local = outputs(tmp / "a", "prompt_tokens")
    assert served and all(served[k] == local[k] for k in served), (served, local)
    # Same engine, same frames, greedy: the same text.
    assert outputs(tmp_path / "srv") == {k: v for k, v in outputs(tmp / "a").items() if k in served}


def test_hf_backend_sees_the_same_tokens(qwen25_runs, tmp_path):
    tmp, _, _ = qwen25_runs
    proc = run_cli("run", "--backend", "hf", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc,demo-stvg",
                   "--max-samples", "3", "--max-tokens", "6", "--no-progress", "--output-dir", str(tmp_path / "hf"),
                   "--cache-dir", str(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    hf = outputs(tmp_path / "hf", "prompt_tokens")
    local = outputs(tmp / "a", "prompt_tokens")
    assert len(hf) == 6
    assert all(hf[k] == local[k] for k in hf), (hf, local)
