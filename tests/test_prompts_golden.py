"""Prompts byte for byte: the default (official) prompt of each benchmark equals the text its authors' code, or the
lmms-eval task the authors point to, builds for the same record.

tests/fixtures/prompts/golden.jsonl holds, per case, a unified record and the prompt the official prompt-building
code produced for it (run in a scratch environment outside the project; only the resulting text is committed, with
its source). Benchmarks without a published prompt, or whose published prompt cannot apply, are listed in
EXCEPTIONS with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vbench_async.benchmarks import get_benchmark, list_benchmarks
from vbench_async.benchmarks.prompts import PROMPT_VARIANTS
from vbench_async.errors import SampleError
from vbench_async.samples import parse_record

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "prompts" / "golden.jsonl"
CASES = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]

EXCEPTIONS = {
    "stvg": "LLaVA-ST's prompt asks for its own special tokens (<TEMP-k>, <WIDTH-k>), which only LLaVA-ST's "
            "vocabulary has; the project asks for JSON in seconds",
    "odvbench": "no prompt published (only the hub card)",
    "videommlu": "VLMEvalKit's Video_MMLU_CAP draws one of several caption prompts at random per item "
                 "(random.choice(detailed_caption_prompts)); no single text to match",
}


def _render(case: dict) -> str:
    bench = get_benchmark(case["benchmark"])
    return bench.render_prompt(parse_record(case["record"], benchmark=bench.id, index=0))


@pytest.mark.parametrize("case", CASES, ids=[f"{c['benchmark']}-{c['case']}" for c in CASES])
def test_default_prompt_is_the_official_text(case: dict) -> None:
    assert _render(case) == case["prompt"], case["source"]


def test_every_benchmark_has_a_golden_prompt_or_a_named_exception() -> None:
    real = {b for b in list_benchmarks() if not get_benchmark(b).card.synthetic}
    covered = {c["benchmark"].partition("@")[0] for c in CASES}
    assert covered.isdisjoint(EXCEPTIONS)
    assert real == covered | set(EXCEPTIONS), sorted(real - covered - set(EXCEPTIONS))


@pytest.mark.parametrize("variant", PROMPT_VARIANTS)
@pytest.mark.parametrize("thinking", [False, True])
def test_a_plans_renderer_renders_as_render_prompt(variant: str, thinking: bool) -> None:
    """`prompt_renderer` (each template prepared once: the context variables it reads, its globals merged once)
    gives every golden record, under every variant, with and without thinking, the text `render_prompt` gives, and
    the same refusals."""
    for case in CASES:
        bench = get_benchmark(case["benchmark"])
        bench.prompt_variant = variant
        sample = parse_record(case["record"], benchmark=bench.id, index=0)
        render = bench.prompt_renderer(thinking)
        try:
            expected = bench.render_prompt(sample, thinking)
        except SampleError:
            with pytest.raises(SampleError):
                render(sample)
            continue
        assert render(sample) == expected, (case["benchmark"], case["case"])
        assert render(sample) == expected  # again, from the prepared template
