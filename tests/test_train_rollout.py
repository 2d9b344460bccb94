"""Rollout helpers: trimming generated rows, rewards from the scorers, hybrid online/offline groups."""

from __future__ import annotations

import pytest

from vbench_async.backends.base import Request
from vbench_async.samples import Sample
from vbench_async.train.config import RewardConfig
from vbench_async.train.data import TrainItem
from vbench_async.train.rollout import (
    Group,
    Response,
    Sampled,
    SpecialIds,
    make_responses,
    mix_offline,
    offline_responses,
    rollout_seed,
    score,
    special_ids,
    trim,
)

IDS = SpecialIds(eos=frozenset({9, 10}), pad=10, media=frozenset({7}))
SAMPLE = Sample(benchmark="t", sample_id="1", task_type="multiple choice", question="?",
                answer="<answer>B</answer>", options=("A. x", "B. y"))


@pytest.fixture(scope="module")
def tokenizer_and_ids():
    from transformers import AutoTokenizer

    from vbench_async.demo.tiny_models import ensure_tiny_model

    path = str(ensure_tiny_model("tiny-qwen2.5-vl"))
    return AutoTokenizer.from_pretrained(path), special_ids(path)


def test_trim_cuts_after_eos_before_media_tokens_and_drops_padding():
    assert trim([1, 2, 9, 10, 10], IDS) == ([1, 2, 9], True)
    assert trim([1, 2, 3], IDS) == ([1, 2, 3], False)  # hit max_tokens: unfinished
    assert trim([1, 7, 2, 9], IDS) == ([1], False)  # a video/image placeholder would break the training forward
    assert trim([1, 2, 3, 10, 10], SpecialIds(frozenset({9}), 10, frozenset())) == ([1, 2, 3], False)


def test_special_ids_of_a_tiny_model(tokenizer_and_ids):
    tok, ids = tokenizer_and_ids
    assert tok.convert_tokens_to_ids("<|im_end|>") in ids.eos
    assert ids.pad == tok.pad_token_id
    assert ids.media == {tok.convert_tokens_to_ids("<|image_pad|>"), tok.convert_tokens_to_ids("<|video_pad|>")}
    rows = [Sampled([tok.convert_tokens_to_ids("B"), next(iter(ids.eos)), ids.pad], [-0.5, -0.25, -3.0]),
            Sampled(list(tok.encode("A B C")))]
    first, second = make_responses(rows, tok, ids)
    assert first.text == "B" and first.finished and len(first.token_ids) == 2
    assert first.rollout_logp == [-0.5, -0.25]  # cut with the tokens
    assert second.text == "A B C" and not second.finished and second.rollout_logp is None


def test_seeds_are_fixed_by_step_round_and_index():
    assert rollout_seed(0, 3, 0, 5) == rollout_seed(0, 3, 0, 5)
    assert len({rollout_seed(0, s, r, i) for s in range(4) for r in range(2) for i in range(4)}) == 32


def _group(texts: list[str], offline: tuple[str, ...] = ()) -> Group:
    item = TrainItem(0, SAMPLE, "prompt", offline=offline)
    group = Group(item, Request("r", "prompt"), [Response([1], t) for t in texts])
    score(group, RewardConfig())
    return group


def test_rewards_are_the_scorer_library_reward():
    from vbench_async.scoring import reward_parts

    group = _group(["<answer>B</answer>", "A", "no idea"])
    assert group.rewards == pytest.approx([1.0, 0.0, 0.0])
    assert group.responses[0].format == 1.0
    assert group.rewards[0] == reward_parts(SAMPLE, "<answer>B</answer>")["overall"]


def test_offline_responses_end_with_eos_and_respect_max_tokens(tokenizer_and_ids):
    tok, _ = tokenizer_and_ids
    item = TrainItem(0, SAMPLE, "p", offline=("<answer>B</answer>", "a very long offline answer " * 20))
    short, long_ = offline_responses(item, 2, tok, tok.eos_token_id, max_tokens=16)
    assert short.offline and short.token_ids[-1] == tok.eos_token_id and short.text == "<answer>B</answer>"
    assert len(long_.token_ids) == 16 and long_.token_ids[-1] == tok.eos_token_id


def test_unconditional_mixing_appends_k_offline_responses(tokenizer_and_ids):
    tok, _ = tokenizer_and_ids
    group = _group(["A", "C", "D"], offline=("<answer>B</answer>",))  # the rollout generated n - k = 3
    assert mix_offline(group, 1, None, tok, tok.eos_token_id, 32, RewardConfig())
    assert [r.offline for r in group.responses] == [False, False, False, True]
    assert group.rewards == pytest.approx([0, 0, 0, 1.0])
    assert not mix_offline(_group(["A"]), 1, None, tok, tok.eos_token_id, 32, RewardConfig())  # no offline text


def test_gated_mixing_replaces_only_when_the_group_does_badly(tokenizer_and_ids):
    tok, _ = tokenizer_and_ids
    bad = _group(["A", "C", "D", "A"], offline=("B",))
    assert mix_offline(bad, 2, 0.5, tok, tok.eos_token_id, 32, RewardConfig())
    assert [r.offline for r in bad.responses] == [False, False, True, True] and len(bad.responses) == 4
    good = _group(["B", "B", "B", "A"], offline=("B",))
    assert not mix_offline(good, 2, 0.5, tok, tok.eos_token_id, 32, RewardConfig())
    assert not any(r.offline for r in good.responses)


def test_rollout_sampling_maps_every_field_as_the_evaluation_backend_does():
    """#26: the rollout used to copy the mapping and drop the repetition and presence penalties."""
    from dataclasses import fields

    from vbench_async.backends.base import SamplingParams
    from vbench_async.backends.vllm import VLLMBackend
    from vbench_async.train.vllm_rollout import rollout_sampling_params

    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_tokens=33, seed=5, repetition_penalty=1.3,
                              presence_penalty=0.4)
    assert all(getattr(sampling, f.name) != f.default for f in fields(SamplingParams))  # every field non-default
    request = Request("r", "Which letter?", sampling=sampling, n=4)
    evaluation = VLLMBackend("tiny-qwen2.5-vl").sampling_params(request)
    rollout = rollout_sampling_params(request, IDS.media)
    # How results come back, the media-token bias and the sampled token's log-prob (for TIS) of rollouts.
    engine_side = {"output_kind", "logit_bias", "logprobs"}
    for name in type(evaluation).__struct_fields__:
        if name not in engine_side:
            assert getattr(rollout, name) == getattr(evaluation, name), name
    for f in fields(SamplingParams):
        assert getattr(rollout, f.name) == getattr(sampling, f.name), f.name
    assert rollout.n == 4 and rollout.logit_bias == {7: -100.0} and rollout.logprobs == 0
