"""Evaluation recipes (benchmarks/recipes.py, issue 39): prompts byte-exact against the makers' own code, frame counts
and sizes (after the second resize) equal to qwen-vl-utils + the Qwen3-VL video processor, and the recipe in the
config hash. The goldens were made by running the makers' code outside the project (tests/fixtures/recipes/README.md);
every prompt golden is also rendered from its reference record by tests/test_recipe_prompt_goldens.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vbench_async.backends.base import SamplingParams
from vbench_async.backends.sampling_overrides import SamplingOverrides
from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.recipes import RECIPES, Recipe, RecipePart
from vbench_async.evaluation.runner import BenchmarkPlan
from vbench_async.frames.frame_settings import FrameSettings
from vbench_async.models import family_ref
from vbench_async.samples import Sample

FIXTURES = Path(__file__).parent / "fixtures" / "recipes"
PROMPT_GOLDENS = {"qwen3-vl": "prompts-qwen3-vl-videomme.jsonl", "lmms-eval": "prompts-lmms-eval-videomme.jsonl",
                  "vlmevalkit": "prompts-vlmevalkit-videomme.jsonl"}


def _goldens(recipe: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / PROMPT_GOLDENS[recipe]).read_text().splitlines() if line]


def _videomme(recipe: str, prompt_variant: str | None = None):
    bench = get_benchmark("videomme")
    bench.use_recipe(RECIPES[recipe], prompt_variant)
    return bench


# -- prompts ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("recipe", sorted(PROMPT_GOLDENS))
def test_the_recipe_renders_the_makers_videomme_prompt_byte_for_byte(recipe):
    bench = _videomme(recipe)
    goldens = _goldens(recipe)
    assert len(goldens) == 5
    for g in goldens:  # the fixture holds the fields the maker's function read: the Sample is rebuilt from them
        sample = Sample(benchmark="videomme", sample_id=str(g["record_id"]), task_type="multiple choice",
                        question=g["maker_input"]["question"],
                        options=tuple(g["maker_input"].get("options") or g["maker_input"]["candidates"]),
                        answer="A")
        assert bench.render_prompt(sample) == g["prompt"], g["record_id"]
        assert RECIPES[recipe].system_prompt == g["system_prompt"]


def test_other_benchmarks_keep_the_official_prompt_and_a_chosen_variant_wins():
    mvbench = get_benchmark("mvbench")
    mvbench.use_recipe(RECIPES["qwen3-vl"], None)
    assert mvbench.prompt_variant == "qwen3-vl"
    assert mvbench.prompt_templates() == ["multiple_choice", "official/mvbench"]  # (thinking: the routed template)
    assert _videomme("qwen3-vl", "predecessor").prompt_variant == "predecessor"  # an explicit flag wins
    assert _videomme("qwen3-vl", "official").prompt_variant == "official"  # even when it names the default
    assert _videomme("easyvideor1").prompt_variant == "predecessor"
    mvbench.use_recipe(RECIPES["vlmevalkit"], "official")  # VLMEvalKit's MVBench prompt needs a system message
    assert mvbench.prompt_templates() == ["multiple_choice", "official/mvbench"]


# -- frames -------------------------------------------------------------------------------------------------------
def _frames_fixture() -> list[dict]:
    return json.loads((FIXTURES / "frames-qwen3-vl.json").read_text())["recipes"]


# fixture label prefix -> (recipe, the user's frame flags): how each maker's pipeline is asked for here
FRAME_CASES = {
    "qwen3-vl: Qwen3-VL repo evaluation/VideoMME/infer_instruct.sh": ("qwen3-vl", FrameSettings()),
    "qwen3-vl: Qwen3-VL repo evaluation/VideoMME/run_videomme.py": ("qwen3-vl", FrameSettings(min_pixels=100352)),
    "lmms-eval: --model qwen3_vl": ("lmms-eval", FrameSettings()),
    "easyvideor1": ("easyvideor1", FrameSettings()),
    # VLMEvalKit: the dataset's name picks the frames ('Video-MME': qwen-vl-utils' defaults, the recipe's own)
    "vlmevalkit: Qwen3-VL-8B-Instruct config (vLLM) with the 'Video-MME' dataset": ("vlmevalkit", FrameSettings()),
    "vlmevalkit: Qwen3-VL-8B-Instruct config (vLLM) with a *_1fps": ("vlmevalkit", FrameSettings(fps=1.0)),
    "vlmevalkit: Qwen3-VL-8B-Instruct config (vLLM) with a *_64frame": ("vlmevalkit", FrameSettings(nframes=64)),
}


def _frame_case(label: str) -> tuple[str, FrameSettings] | None:
    return next((v for k, v in FRAME_CASES.items() if label.startswith(k)), None)


def test_every_frame_case_is_checked_or_known_to_be_out_of_scope():
    labels = [r["label"] for r in _frames_fixture()]
    checked = [label for label in labels if _frame_case(label)]
    assert len(checked) == 7  # vllm_generate: no recipe of its own yet
    assert all(label.startswith("lmms-eval: --model vllm_generate") for label in labels if label not in checked)


@pytest.mark.parametrize("entry", [r for r in _frames_fixture() if _frame_case(r["label"])], ids=lambda r: r["label"])
def test_the_recipe_plans_the_makers_frames_after_the_second_resize(entry):
    recipe, flags = _frame_case(entry["label"])
    spec = _videomme(recipe).frame_spec(family_ref("qwen3-vl"), flags)
    assert spec.second_resize_max_pixels == (entry["second_resize"] or {}).get("size.longest_edge")
    assert len(entry["cases"]) == 8
    for case in entry["cases"]:
        where = f"{case['width']}x{case['height']}, {case['duration_s']} s at {case['fps']} fps"
        n = spec.frame_count(case["total_frames"], case["fps"]).n
        assert n == case["frames"], where
        indices = spec.indices(0, case["total_frames"] - 1, n)
        assert (indices[0], indices[-1]) == (case["first_index"], case["last_index"]), where
        steps = spec.resize_steps(case["height"], case["width"], n)
        assert steps[0] == (case["qwen_vl_utils"]["height"], case["qwen_vl_utils"]["width"]), where
        seen = case["model_input"]
        assert steps[-1] == (seen["height"], seen["width"]), where
        assert n // 2 * (steps[-1][0] // 32) * (steps[-1][1] // 32) == seen["video_tokens"], where


def test_an_explicit_frame_flag_wins_over_the_recipe():
    spec = _videomme("qwen3-vl").frame_spec(family_ref("qwen3-vl"), FrameSettings(max_frames=64))
    assert (spec.max_frames, spec.min_pixels, spec.fps) == (64, 3584, 2.0)


# -- sampling -----------------------------------------------------------------------------------------------------
def test_sampling_card_then_recipe_then_explicit_flags():
    qwen = RECIPES["qwen3-vl"]
    s = qwen.sampling(SamplingOverrides())
    assert (s.temperature, s.top_p, s.top_k, s.presence_penalty, s.max_tokens, s.seed) == (
        0.7, 0.8, 20, 1.5, 32768, 3407)
    assert qwen.sampling(SamplingOverrides(max_tokens=512)).max_tokens == 512
    assert qwen.sampling(SamplingOverrides.every(s)) == s
    # A field set to its default still wins: --temperature 0 is greedy, the recipe's other fields stay.
    greedy = qwen.sampling(SamplingOverrides(temperature=0.0))
    assert greedy == SamplingParams(temperature=0.0, top_p=0.8, top_k=20, max_tokens=32768, seed=3407,
                                    presence_penalty=1.5)
    assert qwen.sampling(SamplingOverrides(seed=0, top_k=0)).seed == 0
    lmms = RECIPES["lmms-eval"]
    assert lmms.sampling(SamplingOverrides(), "videomme").max_tokens == 16
    assert lmms.sampling(SamplingOverrides(), "videommmu").max_tokens == 1024
    assert lmms.sampling(SamplingOverrides(), "videomme@64f").max_tokens == 16
    assert lmms.sampling(SamplingOverrides(max_tokens=64), "videomme").max_tokens == 64
    assert lmms.sampling(SamplingOverrides(max_tokens=256), "videomme").max_tokens == 256  # the default, given
    s = RECIPES["vlmevalkit"].sampling(SamplingOverrides(), "videomme")
    assert (s.temperature, s.top_p, s.top_k, s.repetition_penalty, s.presence_penalty, s.max_tokens, s.seed) == (
        0.7, 0.8, 20, 1.0, 1.5, 16384, 0)


def test_a_benchmark_part_may_not_set_again_a_run_wide_sampling_field():
    with pytest.raises(ValueError, match="run-wide"):
        Recipe("x", 1, "x", "x", common=RecipePart(sampling={"max_tokens": 8}),
               benchmarks={"videomme": RecipePart(sampling={"max_tokens": 16})})
    with pytest.raises(ValueError, match="unknown sampling"):
        RecipePart(sampling={"temprature": 0.1})


# -- identity: the config hash and the manifest -------------------------------------------------------------------
def _plan(tmp_path: Path, recipe: str | Recipe | None, bench_id: str = "videomme",
          samples: list[Sample] | None = None) -> BenchmarkPlan:
    """The runner's plan of one benchmark under `recipe` (a built-in one's name, or a Recipe of a test's own) in run
    directory `tmp_path`, resuming what is there."""
    from vbench_async.evaluation.run_config import RunConfig, recipe_of
    from vbench_async.evaluation.runner import _plan_benchmark

    named = recipe if isinstance(recipe, str) else None
    cfg = RunConfig(model="tiny-qwen3-vl", recipe=named)
    bench = get_benchmark(bench_id)
    bench.use_recipe(recipe_of(cfg) if named else recipe if isinstance(recipe, Recipe) else None,
                     cfg.prompt.prompt_variant)
    return _plan_benchmark(bench, family_ref("qwen3-vl"), cfg, tmp_path, list(samples or []), decoder="pyav")


def test_each_recipe_has_its_own_result_file_and_none_keeps_the_old_hash(tmp_path):
    from vbench_async.results.result_file import config_hash

    default = _plan(tmp_path, None)
    # The config as it was before recipes existed: no recipe key, the card's frames, greedy defaults.
    assert set(default.config.to_json()) == {"model", "backend", "decoder", "benchmark", "frames", "prompt",
                                             "thinking", "sampling"}
    assert default.config.sampling.to_json() == SamplingParams().to_dict()
    assert default.store.config_hash == config_hash(default.config.to_json())
    plans = {name: _plan(tmp_path, name) for name in RECIPES}
    hashes = {p.store.config_hash for p in plans.values()} | {default.store.config_hash}
    assert len(hashes) == len(RECIPES) + 1
    for name, p in plans.items():
        assert p.config.to_json()["recipe"] == {"name": name, "version": RECIPES[name].version}
    assert plans["qwen3-vl"].config.frames.second_resize_max_pixels == 25165824
    assert plans["lmms-eval"].config.sampling.max_tokens == 16


def test_a_run_resumed_under_another_recipe_reuses_none_of_the_first_recipes_results(tmp_path: Path) -> None:
    """One run directory, demo-mc under easyvideor1 with three samples answered, then planned again: under the same
    recipe those three are done; under any other recipe (or none) every sample is pending and lands in another file:
    even a recipe that sets nothing, or another version of one, whose settings are the cards' own."""
    from vbench_async.sample_result import Result

    samples = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)]
    first = _plan(tmp_path, "easyvideor1", "demo-mc", samples)
    assert len(first.entries) == len(samples) > 3
    answered = [s.sample_id for s in samples[:3]]
    with first.store:
        for s in samples[:3]:
            first.store.append(Result(sample_id=s.sample_id, benchmark=s.benchmark, config_hash=first.store.config_hash,
                                      task_type=s.task_type, question=s.question, options=list(s.options),
                                      answer=s.answer, video=s.video, fields={}, prompt="p", output=s.answer,
                                      extracted=s.answer, score=1.0, well_formed=True))
    resumed = _plan(tmp_path, "easyvideor1", "demo-mc", samples)
    assert resumed.store.path == first.store.path
    assert [e.sample.sample_id for e in resumed.entries] == [s.sample_id for s in samples[3:]]
    bare = [Recipe("bare", v, "sets nothing", "this test") for v in (1, 2)]
    plans = {str(other): _plan(tmp_path, other, "demo-mc", samples) for other in ("qwen3-vl", None, *bare)}
    cards = plans["None"].config.to_json()
    for b in bare:  # the identity alone tells them apart
        assert plans[str(b)].config.to_json() == {**cards, "recipe": {"name": "bare", "version": b.version}}
    assert len({p.store.path for p in plans.values()} | {first.store.path}) == len(plans) + 1
    for other, plan in plans.items():
        assert plan.store.config_hash != first.store.config_hash and plan.store.path != first.store.path
        assert plan.store.path.name.startswith("demo-mc.") and plan.store.config_hash in plan.store.path.name
        assert [e.sample.sample_id for e in plan.entries] == [s.sample_id for s in samples], other
        assert not plan.store.completed_ids() and not set(answered) & plan.store.completed_ids()
    assert first.store.completed_ids() == set(answered)  # the first recipe's file is as it was


def test_the_manifest_names_the_recipe(tmp_path):
    from vbench_async.models import family_ref as ref
    from vbench_async.results.manifest import manifest

    p = _plan(tmp_path, "qwen3-vl")
    out = manifest(ref("qwen3-vl"), {"backend": "vllm", "thinking": False, "sampling": {}, "prompt": {}}, {}, [p],
                   {}, 0.0, 1.0)
    assert out["recipe"] == {"name": "qwen3-vl", "version": 2}
    assert out["benchmarks"]["videomme"]["prompt_variant"] == "qwen3-vl"


def test_the_recipe_travels_in_the_run_configs_json_form():
    from vbench_async.errors import UserError
    from vbench_async.evaluation.run_config import RunConfig

    cfg = RunConfig(model="m", recipe="lmms-eval")
    assert RunConfig.from_json(cfg.to_json()).recipe == "lmms-eval"
    with pytest.raises(UserError):
        RunConfig.from_json({**cfg.to_json(), "recipe": "nope"})


def test_run_help_lists_every_recipe():
    from conftest import run_cli

    out = run_cli("run", "--help", check=True).stdout
    flat = " ".join(out.split())
    for name, recipe in RECIPES.items():
        assert f"{name}: {' '.join(recipe.summary.split())}" in flat
