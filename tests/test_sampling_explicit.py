"""Identity of a result: every backend sends every sampling field, so a checkpoint's generation_config (here a
repetition_penalty, as Qwen's checkpoints ship 1.05) never changes the answers; and the config hash covers what can
change them (backend kind, decoder, model revision)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from conftest import SERVED, SERVER_GROUP, outputs, run_cli, serve

from vbench_async.backends.base import Request, SamplingParams, explicit_sampling

PENALTY = 3.0  # strong enough that greedy answers of the random tiny model change when it is applied


def test_the_openai_request_names_every_sampling_field():
    from vbench_async.backends.openai import OpenAIBackend

    body = OpenAIBackend(model="m", base_url="http://127.0.0.1:1/v1").payload(Request("r", "hi"))
    for name in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                 "frequency_penalty", "max_tokens", "seed"):
        assert name in body, name
    assert body["repetition_penalty"] == 1.0 and body["top_k"] == 0 and body["presence_penalty"] == 0.0
    assert explicit_sampling(SamplingParams(repetition_penalty=1.2))["repetition_penalty"] == 1.2


def test_the_vllm_request_names_every_sampling_field():
    from vbench_async.backends.vllm import VLLMBackend

    sp = VLLMBackend("m").sampling_params(Request("r", "hi"))
    assert (sp.repetition_penalty, sp.presence_penalty, sp.frequency_penalty, sp.min_p) == (1.0, 0.0, 0.0, 0.0)


@pytest.fixture(scope="module")
def penalised_model(tmp_path_factory):
    """The tiny Qwen2.5-VL checkpoint and a copy whose generation_config.json sets a repetition penalty."""
    from vbench_async.demo.tiny_models import ensure_tiny_model

    plain = ensure_tiny_model("tiny-qwen2.5-vl")
    copy = tmp_path_factory.mktemp("penalised") / "model"
    shutil.copytree(plain, copy)
    gen = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps({**gen, "repetition_penalty": PENALTY}))
    return plain, copy


def _answers(model_dir) -> tuple[list[str], list[str]]:
    """Greedy answers through the HF backend, and through the checkpoint's own generation_config (what
    `generate` does with only the request's non-default fields, as the backend did before)."""
    import torch

    from vbench_async.backends.hf import HFBackend

    backend = HFBackend(str(model_dir))
    backend._load()
    ours, own = [], []
    for prompt in ("Count to twenty: one two three", "Repeat after me: la la la la la la"):
        request = Request("r", prompt, sampling=SamplingParams(max_tokens=24))
        ours.append(asyncio.run(backend.generate(request)).text)
        batch = backend.inputs(request)
        with torch.inference_mode():
            out = backend.model.generate(**batch, max_new_tokens=24, do_sample=False)
        own.append(backend.processor.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)[0])
    return ours, own


def test_a_generation_config_penalty_does_not_change_hf_answers(penalised_model):
    plain, penalised = penalised_model
    plain_ours, plain_own = _answers(plain)
    pen_ours, pen_own = _answers(penalised)
    assert pen_own != plain_own, "the penalty must matter, or this test proves nothing"
    assert plain_ours == plain_own  # a neutral generation_config: the backend changes nothing
    assert pen_ours == plain_ours


def test_the_config_hash_covers_backend_and_decoder(tmp_path):
    from vbench_async import models
    from vbench_async.benchmarks import get_benchmark
    from vbench_async.evaluation.runner import RunConfig, _plan_benchmark

    model = models.resolve("tiny-qwen2.5-vl")
    bench = get_benchmark("demo-mc")
    hashes = set()
    for backend, decoder in (("vllm", "pyav"), ("openai", "pyav"), ("hf", "pyav"), ("vllm", "decord")):
        cfg = RunConfig(model="tiny-qwen2.5-vl", backend=backend)
        plan = _plan_benchmark(bench, model, cfg, tmp_path, [], decoder=decoder)
        assert plan.config.backend == backend and plan.config.decoder == decoder
        hashes.add(plan.store.config_hash)
    assert len(hashes) == 4


def test_a_hub_model_is_identified_by_its_revision(monkeypatch):
    from vbench_async import models

    assert models.hub_revision("nobody/not-a-model-xyz") == "unknown"  # offline and not cached: still a string


@pytest.mark.slow
@pytest.mark.vllm
@SERVER_GROUP
def test_a_served_generation_config_does_not_change_answers(penalised_model, vllm_server, tmp_path):
    """vLLM's server fills every field a request leaves out from the checkpoint's generation_config: the openai
    backend's answers from a server of the penalised copy equal those from a server of the plain model."""
    plain, penalised = penalised_model
    args = ("run", "--backend", "openai", "--model", "tiny-qwen2.5-vl", "--served-model", SERVED, "--benchmarks",
            "demo-mc,demo-ocr", "--max-samples", "3", "--max-tokens", "24", "--no-progress", "--no-site",
            "--cache-dir", str(tmp_path / "cache"))
    first = run_cli(*args, "--base-url", vllm_server, "--output-dir", str(tmp_path / "plain"))
    with serve(penalised) as url:
        second = run_cli(*args, "--base-url", url, "--output-dir", str(tmp_path / "penalised"))
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert outputs(tmp_path / "plain") == outputs(tmp_path / "penalised")
