"""A recipe's system prompt reaches the model (issue 39): `Request.system`, set from the run's recipe, is the first turn
of what every backend sends (the in-process engines' chat template, the openai backend's messages) and the plan counts
it. tiny-qwen3-vl's template adds no system turn of its own, so a system turn in its prompt is the request's; tiny
Qwen2.5-VL's adds "You are a helpful assistant." (lmms-eval's text) when none is sent, so the server test sends
another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import ENGINE_GROUP, SERVED, SERVER_GROUP, outputs, run_cli

from vbench_async import models
from vbench_async.backends.base import Request, SamplingParams, chat_messages
from vbench_async.benchmarks.recipes import RECIPES
from vbench_async.workload.tokens import PromptCounter

LMMS = RECIPES["lmms-eval"].system_prompt
assert LMMS == "You are a helpful assistant."
TURN = f"<|im_start|>system\n{LMMS}<|im_end|>\n"  # the Qwen templates' system turn
QUESTION = "What happens in the video?"


@pytest.fixture(scope="module")
def qwen3() -> models.ModelRef:
    return models.resolve("tiny-qwen3-vl")


@pytest.fixture(scope="module")
def processor(qwen3: models.ModelRef) -> Any:
    return PromptCounter(qwen3.path, qwen3.family).processor  # the checkpoint's AutoProcessor


def test_the_chat_messages_start_with_the_system_turn() -> None:
    assert chat_messages(QUESTION, 1, 0, LMMS)[0] == {"role": "system", "content": LMMS}
    assert [m["role"] for m in chat_messages(QUESTION, 1, 0, LMMS)] == ["system", "user"]
    assert [m["role"] for m in chat_messages(QUESTION, 1, 0)] == ["user"]


def test_the_vllm_backend_renders_the_system_turn_first(processor: Any) -> None:
    from vbench_async.backends.vllm import render_prompt

    text = render_prompt(processor, Request("r", QUESTION, system=LMMS))
    assert text.startswith(TURN) and QUESTION in text
    assert "system" not in render_prompt(processor, Request("r", QUESTION))


def test_the_openai_request_sends_the_system_turn_first() -> None:
    from vbench_async.backends.openai import OpenAIBackend

    backend = OpenAIBackend(model="m", base_url="http://127.0.0.1:1/v1")
    messages = backend.payload(Request("r", QUESTION, system=LMMS))["messages"]
    assert messages[0] == {"role": "system", "content": LMMS} and messages[1]["role"] == "user"
    assert [m["role"] for m in backend.payload(Request("r", QUESTION))["messages"]] == ["user"]


def test_the_hf_backend_tokenizes_the_system_turn(qwen3: models.ModelRef) -> None:
    from vbench_async.backends.hf import HFBackend

    backend = HFBackend(qwen3.path)
    backend._load()
    assert backend.processor is not None
    with_system, without = (backend.processor.batch_decode(backend.inputs(Request("r", QUESTION, system=s))
                                                           ["input_ids"])[0] for s in (LMMS, None))
    assert with_system.startswith(TURN) and with_system == TURN + without


def test_the_plan_counts_the_system_turn(qwen3: models.ModelRef, processor: Any, tmp_path: Path) -> None:
    from vbench_async.workload.memo import ProcessorMemo

    def counter(system: str | None) -> PromptCounter:  # one memo, as two plans of the model share it
        return PromptCounter(qwen3.path, qwen3.family, ProcessorMemo.at(tmp_path, qwen3.path, qwen3.fingerprint,
                                                                        qwen3.family), system)

    turn = len(processor.tokenizer(TURN, add_special_tokens=False)["input_ids"])
    first = counter(LMMS)
    assert first.render(QUESTION, 1, 0).startswith(TURN)
    with_system = first.count(QUESTION).prompt_tokens
    first.save()
    assert counter(None).count(QUESTION).prompt_tokens == with_system - turn > 0  # the memo keeps them apart
    assert counter(LMMS).counts([(QUESTION, (), ())])[0].prompt_tokens == with_system


# -- the real engines ---------------------------------------------------------------------------------------------
# Small frames, given as flags so that they win over the recipe's 32 large ones; the same for the plan without it.
FRAMES = ("--nframes", "4", "--min-pixels", "3136", "--max-pixels", "12544", "--total-pixels", "50176")
FRAME_OVERRIDES = {"nframes": 4, "min_pixels": 3136, "max_pixels": 12544, "total_pixels": 50176}


@pytest.mark.vllm
@ENGINE_GROUP
def test_a_run_under_lmms_eval_sends_the_system_turn_in_process(qwen3: models.ModelRef, processor: Any,
                                                               tmp_path: Path) -> None:
    """`run --recipe lmms-eval` on the in-process engine: each prompt the engine reports is the plan's count with the
    system turn, and longer by the turn's tokens than the same run's plan without the recipe."""
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.runner import RunConfig, plan
    from vbench_async.frames.frame_settings import FrameSettings

    cache = tmp_path / "cache"
    done = run_cli("run", "--model", "tiny-qwen3-vl", "--benchmarks", "demo-mc", "--max-samples", "2",
                   "--max-tokens", "4", "--recipe", "lmms-eval", *FRAMES, "--no-progress", "--no-site",
                   "--workers", "1", "--output-dir", str(tmp_path / "run"), "--cache-dir", str(cache), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    reported = outputs(tmp_path / "run", "prompt_tokens")
    assert len(reported) == 2 and not any(outputs(tmp_path / "run", "error").values())

    def planned(recipe: str | None) -> dict[str, int]:
        cfg = RunConfig(model="tiny-qwen3-vl", selection=Selection(benchmarks=("demo-mc",), max_samples=2),
                        recipe=recipe, frame_overrides=FrameSettings(**FRAME_OVERRIDES), cache_dir=cache)
        return {k: plan(cfg).prompt_tokens[k] for k in reported}

    turn = len(processor.tokenizer(TURN, add_special_tokens=False)["input_ids"])
    assert planned("lmms-eval") == reported
    assert {k: n + turn for k, n in planned(None).items()} == reported


@pytest.mark.vllm
@SERVER_GROUP
def test_the_openai_backend_sends_the_system_turn_to_the_server(vllm_server: str) -> None:
    """vLLM's server counts the request's system turn in the prompt's usage: exactly the plan's count with it, and
    more than without it (the template's shorter default)."""
    from vbench_async.backends.openai import OpenAIBackend

    system = "You are a careful assistant who watches the whole video before answering with one letter."
    served = models.resolve(SERVED)

    async def prompt_tokens(system: str | None) -> int:
        backend = OpenAIBackend(model=SERVED, base_url=vllm_server, max_retries=0)
        await backend.start()
        try:
            done = await backend.generate(Request("r", QUESTION, sampling=SamplingParams(max_tokens=1), system=system))
        finally:
            await backend.close()
        return done.prompt_tokens

    sent, default = asyncio.run(prompt_tokens(system)), asyncio.run(prompt_tokens(None))
    assert sent == PromptCounter(served.path, served.family, system=system).count(QUESTION).prompt_tokens
    assert default == PromptCounter(served.path, served.family).count(QUESTION).prompt_tokens < sent
