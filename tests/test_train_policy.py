"""The training forward (vbench_async.train.policy) against the Hugging Face model's own forward, per family.

The policy runs the vision tower once over the distinct media of a micro-batch and hands the features to the model;
the log-probabilities must equal those of the plain HF forward that encodes every row's media itself.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from vbench_async.backends.base import ImageInput, Request, VideoInput
from vbench_async.train.policy import Policy, collate, encode, forward_batch, run_vision

SIDES = {"tiny-qwen2-vl": 56, "tiny-qwen2.5-vl": 56, "tiny-qwen3-vl": 64}


@pytest.fixture(scope="module", params=list(SIDES))
def backend(request):
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    b = HFBackend(str(ensure_tiny_model(request.param)))
    asyncio.run(b.start())
    b.side = SIDES[request.param]
    return b


def _requests(side: int) -> list[Request]:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (4, side, side, 3), dtype=np.uint8)
    meta = dict(fps=10.0, duration=2.0, total_num_frames=20, frames_indices=[0, 6, 13, 19], width=side, height=side)
    video = VideoInput(frames, meta, "v")
    image = ImageInput(rng.integers(0, 255, (side, side, 3), dtype=np.uint8), "i")
    return [
        Request("video", "What moves?", videos=(video,)),
        Request("text", "Which letter comes after A?"),
        Request("both", "Describe the video and the image.", videos=(video,), images=(image,)),
        Request("image", "What is in the image?", images=(image,)),
    ]


def _reference_logprobs(model, processor_out, response: list[int]) -> torch.Tensor:
    """Log-probs of `response` after the prompt, by the plain HF forward (media encoded inside the model)."""
    batch = {k: v for k, v in processor_out.items()}
    ids = torch.cat([batch["input_ids"], torch.tensor([response])], dim=1)
    batch["input_ids"] = ids
    batch["attention_mask"] = torch.ones_like(ids)
    batch["mm_token_type_ids"] = torch.cat([batch["mm_token_type_ids"], torch.zeros(1, len(response),
                                                                                       dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits = model(**batch, use_cache=False).logits[0, -len(response) - 1: -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0]


def test_policy_logprobs_match_the_hf_forward_on_a_mixed_batch(backend):
    encoded = [encode(backend.inputs(r)) for r in _requests(backend.side)]
    # Rows: every prompt twice (a "group" shares one Encoded object), responses of different lengths.
    prompts = [encoded[i] for i in (0, 0, 1, 2, 2, 3)]
    responses = [[5, 6, 7], [8], [9, 10], [11, 12, 13, 14], [15], [16, 17]]
    batch = collate(prompts, responses, pad_id=backend.processor.tokenizer.pad_token_id)
    assert batch.media["video_pixels"].shape[0] < sum(p.media["pixel_values_videos"].shape[0]
                                                      for p in prompts if "pixel_values_videos" in p.media)
    policy = Policy(backend.model)
    with torch.no_grad():
        logp, entropy, zero = forward_batch(policy, batch, temperature=1.0, with_entropy=True)
    assert zero is None and entropy.shape == logp.shape
    for row, (prompt_idx, resp) in enumerate(zip((0, 0, 1, 2, 2, 3), responses)):
        req = _requests(backend.side)[prompt_idx]
        expected = _reference_logprobs(backend.model, backend.inputs(req), resp)
        assert torch.allclose(logp[row, : len(resp)], expected, atol=2e-4), (req.request_id, row)
        assert batch.response_mask[row].sum().item() == len(resp)


def test_text_only_batches_run_a_zero_valued_vision_pass(backend):
    encoded = encode(backend.inputs(_requests(backend.side)[1]))
    batch = collate([encoded, encoded], [[5, 6], [7]], pad_id=0)
    assert not any(k.endswith("_pixels") for k in batch.media)
    model = backend.model
    outputs, zero = run_vision(model, batch.media, torch.device("cpu"))
    assert outputs is None and zero.item() == 0.0
    model.zero_grad()
    logp, _, zero = forward_batch(Policy(model), batch, 1.0)
    ((logp * batch.response_mask).sum() + zero).backward()
    visual = list(model.model.visual.parameters())
    # Every vision parameter (Qwen3-VL's deepstack mergers included) receives a gradient, and it is exactly zero.
    assert all(p.grad is not None for p in visual)
    assert all(torch.count_nonzero(p.grad) == 0 for p in visual)
    model.zero_grad()


def _mixed_batch(backend):
    """Every prompt twice (a group shares one Encoded), responses of different lengths, one of them empty."""
    encoded = [encode(backend.inputs(r)) for r in _requests(backend.side)]
    order = (0, 0, 1, 2, 2, 3)
    responses = [[5, 6, 7], [8], [9, 10], [11, 12, 13, 14], [], [16, 17]]
    return collate([encoded[i] for i in order], responses, pad_id=backend.processor.tokenizer.pad_token_id)


def _padded_and_packed(model, batch, with_grad: bool):
    """Masked log-probs, entropies (and parameter gradients) of the padded and of the packed forward."""
    results = []
    for packing in (False, True):
        policy = Policy(model, packing=packing)
        assert policy.packed is packing
        model.zero_grad()
        with torch.set_grad_enabled(with_grad):
            logp, entropy, _ = forward_batch(policy, batch, temperature=0.7, with_entropy=True, chunk=2)
        if with_grad:
            (logp * batch.response_mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((logp.detach() * batch.response_mask, entropy * batch.response_mask, grads))
    model.zero_grad()
    return results


def test_packed_forward_gives_the_padded_log_probs_and_entropies(backend):
    """Padding-free packing (one row, per-row positions, a block-diagonal mask on SDPA) changes nothing but the
    layout. (Equal updates: tests/test_train_update.py; gradients of every parameter: the slow eager variant.)"""
    batch = _mixed_batch(backend)
    (lp0, en0, _), (lp1, en1, _) = _padded_and_packed(backend.model, batch, with_grad=False)
    assert torch.allclose(lp0, lp1, atol=1e-5), (lp0 - lp1).abs().max()
    assert torch.allclose(en0, en1, atol=1e-5)
    assert lp1[4].abs().sum() == 0 and lp1.shape == batch.response_ids.shape  # the empty response


@pytest.mark.slow
def test_packed_forward_on_eager_attention_gives_the_padded_log_probs_and_gradients(backend):
    model = backend.model
    model.set_attn_implementation("eager")
    try:
        (lp0, en0, g0), (lp1, en1, g1) = _padded_and_packed(model, _mixed_batch(backend), with_grad=True)
    finally:
        model.set_attn_implementation("sdpa")
    assert torch.allclose(lp0, lp1, atol=1e-5) and torch.allclose(en0, en1, atol=1e-5)
    assert g0.keys() == g1.keys() and len(g0) > 10
    for name in g0:  # vision tower, M-RoPE-positioned text layers, head: all alike
        assert torch.allclose(g0[name], g1[name], atol=1e-5, rtol=1e-4), name


def test_packing_follows_the_attention_implementation(backend):
    """auto: packed only where attention has varlen kernels (flash-attention); a choice given wins."""
    from vbench_async.train.packing import attention_implementation, packs_by_default

    assert attention_implementation(backend.model) == "sdpa" and not Policy(backend.model).packed
    assert Policy(backend.model, packing=True).packed
    backend.model.config.text_config._attn_implementation = "flash_attention_2"  # what from_pretrained would set
    try:
        assert packs_by_default(backend.model) and Policy(backend.model).packed
        assert not Policy(backend.model, packing=False).packed
    finally:
        backend.model.config.text_config._attn_implementation = "sdpa"
