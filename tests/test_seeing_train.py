"""The trainer's data path carries the frames: on the seeing model, the policy forward the RL update differentiates
(training items from a card, frames from the cache through `MediaSource`, the processor call, `encode`, `collate`,
`Policy`) prefers the right option of the demo's multiple-choice questions, and does not once the pixels are blank.

A change that drops or zeroes the pixels anywhere on that path (or a transformers whose forward ignores the vision
features, as 5.17's did) makes the preference fall to chance and this test fail.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

LETTERS = "ABCD"


@pytest.fixture(scope="module")
def policy_setup(tmp_path_factory):
    from transformers import AutoModelForImageTextToText

    from vbench_async.backends.hf import HFBackend
    from vbench_async.models import resolve
    from vbench_async.train.config import DataConfig
    from vbench_async.train.data import MediaSource, frame_spec, load_items
    from vbench_async.train.policy import Policy

    ref = resolve("seeing-qwen2.5-vl")
    cfg = DataConfig(benchmark="demo-mc", cache_dir=str(tmp_path_factory.mktemp("frames")), decode_workers=1)
    items = load_items(cfg)
    media = MediaSource(frame_spec(cfg, ref), cache_dir=cfg.cache_dir, workers=1)
    media.prepare(items)
    backend = HFBackend(ref.path)
    backend._load()
    policy = Policy(backend.model, packing=False)
    yield items, media, backend, policy
    media.close()
    del AutoModelForImageTextToText


def preferred(items, media, backend, policy, blank: bool) -> float:
    """Share of questions whose right letter has the highest log-prob under the policy forward."""
    from vbench_async.backends.base import SamplingParams
    from vbench_async.train.policy import collate, encode, forward_batch

    tok = backend.processor.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    right = []
    for item in items:
        request = media.request(item, SamplingParams(max_tokens=4), 1, item.sample.key)
        if blank:
            video = request.videos[0]
            request = dataclasses.replace(request, videos=(dataclasses.replace(
                video, frames=np.zeros_like(video.frames), uuid=video.uuid + ":blank"),))
        encoded = encode(backend.inputs(request))
        letters = LETTERS[: len(item.sample.options)]
        responses = [tok.encode(x, add_special_tokens=False) + [im_end] for x in letters]
        batch = collate([encoded] * len(letters), responses, tok.pad_token_id)
        with torch.no_grad():
            logp, _, _ = forward_batch(policy, batch, temperature=1.0)
        best = letters[int((logp * batch.response_mask).sum(-1).argmax())]
        right.append(best == item.sample.answer.strip())
    return sum(right) / len(right)


def test_the_policy_forward_prefers_the_right_answer_from_the_frames(policy_setup):
    items, media, backend, policy = policy_setup
    with_frames = preferred(items, media, backend, policy, blank=False)
    blank = preferred(items, media, backend, policy, blank=True)
    assert with_frames >= 0.6, f"the policy picks the right option {with_frames:.2f} of the time with the frames"
    assert blank <= with_frames - 0.25, f"with blank frames {blank:.2f}, with the frames {with_frames:.2f}"
