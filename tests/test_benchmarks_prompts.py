"""Prompt templates: the real letter range, exact question and option text, errors for unusable samples, and a
template hash that follows the template files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vbench_async.benchmarks import get_benchmark, prompts
from vbench_async.errors import SampleError, UserError
from vbench_async.samples import Sample


def mc(options: tuple[str, ...], question: str = "Q?") -> Sample:
    return Sample(benchmark="t", sample_id="1", task_type="multiple choice", question=question,
                  answer="<answer>A</answer>", options=options)


@pytest.mark.parametrize("letters,text", [
    ([], ""), (["A"], "A"), (["A", "B"], "A or B"), (["A", "B", "C"], "A, B, or C"),
    (list("ABCDEFGHIJ"), "A, B, C, D, E, F, G, H, I, or J"),
])
def test_letter_list(letters: list[str], text: str) -> None:
    assert prompts.letter_list(letters) == text


def test_question_and_options_are_rendered_exactly() -> None:
    question = "Given <b>x</b> & {{ y }}, what is 50% of it?\n  (indented line)"
    options = ("A: {% raw %}", "B:   spaced  ", "C. <tag>")
    text = prompts.render("multiple_choice", mc(options, question))
    assert text == (
        "Select the best answer to the following multiple-choice question based on the video. Respond with only the "
        "letter (A, B, or C) of the correct option.\n" + question + "\n" + "\n".join(options) + "\nThe best answer is:"
    )


def test_letters_follow_the_options_not_their_count() -> None:
    text = prompts.render("multiple_choice", mc(("B. second", "D. fourth")))
    assert "(B or D)" in text


def test_unusable_samples_and_templates_fail_clearly() -> None:
    with pytest.raises(SampleError, match="multiple-choice question without options") as err:
        prompts.render("multiple_choice", mc(()))
    assert err.value.kind == "record_invalid"
    with pytest.raises(UserError, match="unknown prompt template 'nope'; available: caption, instructed"):
        prompts.render("nope", mc(("A. x",)))
    with pytest.raises(SampleError, match="no prompt template for task type 'caption'"):
        get_benchmark("ovobench").render_prompt(Sample(benchmark="ovobench", sample_id="1", task_type="caption",
                                                       question="", answer="x"))


def test_every_template_renders_both_variants() -> None:
    sample = Sample(benchmark="t", sample_id="1", task_type="REC", question="How many?", answer="<answer>2</answer>",
                    options=("A. x", "B. y"), images=("i.png",))
    for name in prompts.template_names():
        for thinking in (False, True):
            text = prompts.render(name, sample, thinking)
            assert text and text == text.strip() and "\n\n\n" not in text and "{" not in text.replace(
                '{"time"', "").replace('{"4"', "")


def test_template_hash_follows_template_sources(tmp_path: Path, monkeypatch) -> None:
    routing = {"default": "multiple_choice"}
    before = prompts.template_hash(routing)
    assert before == prompts.template_hash(dict(routing))
    assert before != prompts.template_hash({"default": "multiple_choice", "regression": "numeric"})
    copy = tmp_path / "prompts"
    shutil.copytree(prompts.TEMPLATE_DIR, copy)
    monkeypatch.setattr(prompts, "TEMPLATE_DIR", copy)
    assert prompts.template_hash(routing) == before
    (copy / "_macros.jinja").write_text((copy / "_macros.jinja").read_text() + "\n{# edited #}")
    assert prompts.template_hash(routing) != before  # an imported macro file is part of the hash


# -- variants: each benchmark's official prompt by default, the predecessor's as a named variant ---------------------


def _mc_sample(bid: str) -> Sample:
    from vbench_async.samples import parse_record

    return parse_record({"problem": "What is it?", "problem_type": "multiple choice", "options": ["A. x", "B. y"],
                         "solution": "<answer>B</answer>", "problem_id": 0, "path": "v.mp4"}, bid, 0)


def test_official_variant_is_the_benchmarks_own_prompt():
    bench = get_benchmark("mvbench")
    assert bench.prompt_variant == "official" and bench.template_for(_mc_sample("mvbench")) == "official/mvbench"
    assert bench.render_prompt(_mc_sample("mvbench")) == \
        "Question:What is it?\nOption:\n(A) x\n(B) y\nOnly give the best option.\n"  # lmms-eval's, byte for byte
    # thinking keeps the project's reasoning template; a benchmark without a published prompt keeps the routed one
    assert bench.template_for(_mc_sample("mvbench"), thinking=True) == "multiple_choice"
    assert get_benchmark("videomme").template_for(_mc_sample("videomme")) == "official/videomme"
    assert get_benchmark("odvbench").template_for(_mc_sample("odvbench")) == "multiple_choice"  # none published


def test_predecessor_variant_renders_easyvideor1s_scheme_and_changes_the_config_hash():
    official, predecessor = get_benchmark("mvbench"), get_benchmark("mvbench")
    predecessor.prompt_variant = "predecessor"
    text = predecessor.render_prompt(_mc_sample("mvbench"))
    assert "(A, B, C, or D)" in text and "Question: What is it? Possible answer choices:\nA. x\nB. y" in text
    assert text.endswith("The best answer is:")
    assert 'Therefore, the final answer is: $LETTER' in predecessor.render_prompt(_mc_sample("mvbench"), True)
    assert official.prompt_template_hash() != predecessor.prompt_template_hash()
    from vbench_async.results.manifest import prompt_templates

    recorded = prompt_templates(predecessor)
    assert recorded["variant"] == "predecessor" and "predecessor/multiple_choice.jinja" in recorded["files"]
    assert "official/mvbench.jinja" in prompt_templates(official)["files"]


def test_every_official_prompt_belongs_to_a_card_and_an_unknown_variant_is_refused():
    from vbench_async.benchmarks import list_benchmarks
    from vbench_async.errors import UserError

    names = {p.stem for p in (prompts.TEMPLATE_DIR / "official").glob("*.jinja")}
    cards = set(list_benchmarks())
    presets = {f"{c}_{p}" for c in cards for p in get_benchmark(c).card.presets}  # mlvu_dev: the dev preset's
    assert names and names <= cards | presets
    with pytest.raises(UserError, match="unknown prompt variant 'paper'"):
        prompts.PromptSettings("paper")


def test_prompt_variant_option_reaches_the_run_config():
    import argparse

    from vbench_async.cli.run_options import add_run_options as add_options
    from vbench_async.cli.run_options import config_from_args

    parser = argparse.ArgumentParser()
    add_options(parser)
    base = ["--model", "m", "--benchmarks", "mvbench"]
    assert config_from_args(parser.parse_args(base)).prompt.prompt_variant is None  # not given: official, or a recipe's
    cfg = config_from_args(parser.parse_args([*base, "--prompt-variant", "predecessor"]))
    assert cfg.prompt.prompt_variant == "predecessor"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--prompt-variant", "nope"])
