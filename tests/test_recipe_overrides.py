"""card < recipe < explicit flags, where a flag is explicit because it was given, not because its value differs from
the default (issue 39): `--temperature 0` under a sampling recipe is greedy, `--prompt-variant official` under a
prompt recipe is official; the same through a server job's JSON and a training validation run's. A run without a
recipe keeps its config hash."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from vbench_async.backends.base import SamplingParams
from vbench_async.backends.sampling_overrides import SamplingOverrides
from vbench_async.benchmarks.recipes import RECIPES
from vbench_async.cli import build_parser
from vbench_async.cli.run_options import config_from_args
from vbench_async.evaluation.run_config import RunConfig, recorded, run_sampling
from vbench_async.evaluation.runner import _load, _plan_benchmark
from vbench_async.models import family_ref
from vbench_async.serve.jobs import JobSpec

QWEN = RECIPES["qwen3-vl"]
QWEN_SAMPLING = QWEN.sampling(SamplingOverrides())
BENCH = "demo-mc"  # data ships with the project: `_load` runs as a run loads


def _cli(*flags: str) -> RunConfig:
    args = build_parser().parse_args(["run", "--model", "tiny-qwen3-vl", "--benchmarks", BENCH, *flags])
    return config_from_args(args, local=False)


def _job(settings: dict[str, Any]) -> RunConfig:
    spec = JobSpec.from_json({"selection": {"benchmarks": [BENCH]}, **settings})
    return spec.run_config(RunConfig(model="tiny-qwen3-vl", backend="openai"))


def _variant(cfg: RunConfig) -> str:
    (bench, _), = _load(cfg)[0]
    return bench.prompt_variant


def _bench_sampling(cfg: RunConfig, tmp_path: Path) -> dict[str, Any]:
    """The sampling a benchmark's result file is keyed on (its config), as the run plans it."""
    (bench, _), = _load(cfg)[0]
    plan = _plan_benchmark(bench, family_ref("qwen3-vl"), cfg, tmp_path, [], decoder="pyav")
    return plan.config.sampling.to_json()


def test_the_recipes_sampling_differs_from_the_defaults_where_these_tests_look() -> None:
    assert QWEN_SAMPLING.temperature == 0.7 != SamplingParams().temperature  # else nothing below could fail
    assert RECIPES["lmms-eval"].common.prompt_variant != "official"


@pytest.mark.parametrize("make", [lambda: _cli("--recipe", "qwen3-vl", "--temperature", "0"),
                                  lambda: _job({"recipe": "qwen3-vl", "sampling": {"temperature": 0}})],
                         ids=["command line", "server job"])
def test_a_sampling_flag_at_its_default_still_overrides_the_recipe(make: Callable[[], RunConfig], tmp_path: Path
                                                                   ) -> None:
    cfg = make()
    assert cfg.sampling == SamplingOverrides(temperature=0.0)
    want = SamplingParams(temperature=0.0, top_p=0.8, top_k=20, max_tokens=32768, seed=3407, presence_penalty=1.5)
    assert run_sampling(cfg) == want  # greedy; the recipe's other fields kept (the engine's seed, 3407)
    assert _bench_sampling(cfg, tmp_path) == want.to_dict()
    assert recorded(cfg).sampling == SamplingOverrides.every(want)  # what the manifest writes down


@pytest.mark.parametrize("make", [lambda: _cli("--recipe", "qwen3-vl"),
                                  lambda: _job({"recipe": "qwen3-vl"}),
                                  lambda: _job({"recipe": "qwen3-vl", "sampling": {"temperature": None}})],
                         ids=["command line", "server job", "server job, null"])
def test_no_flag_leaves_the_recipes_values(make: Callable[[], RunConfig], tmp_path: Path) -> None:
    cfg = make()
    assert cfg.sampling == SamplingOverrides()
    assert run_sampling(cfg) == QWEN_SAMPLING
    assert _bench_sampling(cfg, tmp_path) == QWEN_SAMPLING.to_dict()
    assert _variant(cfg) == "qwen3-vl"


@pytest.mark.parametrize("make", [lambda: _cli("--recipe", "lmms-eval", "--prompt-variant", "official"),
                                  lambda: _job({"recipe": "lmms-eval", "prompt": {"prompt_variant": "official"}})],
                         ids=["command line", "server job"])
def test_the_default_prompt_variant_given_overrides_the_recipes(make: Callable[[], RunConfig]) -> None:
    cfg = make()
    assert _variant(cfg) == "official"
    assert recorded(cfg).prompt.prompt_variant == "official"


def test_without_the_flag_the_recipes_prompt_variant_holds() -> None:
    for cfg in (_cli("--recipe", "lmms-eval"), _job({"recipe": "lmms-eval"})):
        assert cfg.prompt.prompt_variant is None
        assert _variant(cfg) == "lmms-eval-qwen3-vl"
        assert recorded(cfg).prompt.prompt_variant == "lmms-eval-qwen3-vl"


def test_a_benchmarks_recipe_max_tokens_yields_to_a_given_one_at_the_default() -> None:
    """lmms-eval sets max tokens per task (Video-MME 16): `--max-tokens 256`, the default, still wins."""
    cfg = _cli("--recipe", "lmms-eval", "--max-tokens", "256")
    assert run_sampling(cfg, "videomme").max_tokens == 256
    assert run_sampling(_cli("--recipe", "lmms-eval"), "videomme").max_tokens == 16


def test_what_the_user_set_travels_in_the_json_form() -> None:
    """`run --server` sends `to_json()`: unset fields go as null and stay unset on the server."""
    cfg = _cli("--recipe", "qwen3-vl", "--temperature", "0", "--prompt-variant", "official")
    back = RunConfig.from_json(cfg.to_json())
    assert back.sampling == cfg.sampling == SamplingOverrides(temperature=0.0)
    assert back.prompt == cfg.prompt and run_sampling(back) == run_sampling(cfg)


def test_a_training_validation_run_sets_the_keys_it_has(tmp_path: Path) -> None:
    from vbench_async.train.config import ValidationConfig

    v = ValidationConfig(run={"selection": {"benchmarks": [BENCH]}, "recipe": "qwen3-vl",
                              "sampling": {"temperature": 0.0}, "prompt": {"prompt_variant": "official"}})
    cfg = v.run_config("tiny-qwen3-vl", tmp_path, "hf", None)
    assert run_sampling(cfg).temperature == 0.0 and run_sampling(cfg).top_k == 20
    assert _variant(cfg) == "official"


def test_without_a_recipe_the_run_records_and_hashes_what_it_did_before(tmp_path: Path) -> None:
    """No recipe: the defaults, unset or given, make the same result file (the hash existing results carry)."""
    unset, given = _cli(), _cli("--temperature", "0", "--prompt-variant", "official")
    assert unset.sampling == SamplingOverrides() and unset.prompt.prompt_variant is None
    for cfg in (unset, given):
        assert run_sampling(cfg) == SamplingParams()
        assert recorded(cfg).sampling == SamplingOverrides.every(SamplingParams())
        assert recorded(cfg).prompt.prompt_variant == "official"
    plans = []
    for cfg in (unset, given):
        (bench, _), = _load(cfg)[0]
        plans.append(_plan_benchmark(bench, family_ref("qwen3-vl"), cfg, tmp_path, [], decoder="pyav"))
    assert plans[0].config == plans[1].config and plans[0].store.config_hash == plans[1].store.config_hash
    assert plans[0].config.sampling.to_json() == SamplingParams().to_dict()
    assert "recipe" not in plans[0].config.to_json()


def test_sampling_overrides_declare_exactly_the_sampling_fields() -> None:
    import dataclasses

    assert [f.name for f in dataclasses.fields(SamplingOverrides)] == \
        [f.name for f in dataclasses.fields(SamplingParams)]
    assert SamplingOverrides(top_k=0).over(SamplingParams(top_k=20)).top_k == 0
