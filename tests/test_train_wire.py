"""The wire format of groups between ranks (train/wire.py): safetensors for tensors, JSON for the rest, no pickle.

A real group (tiny-qwen2.5-vl's processor output for a video + image prompt, a full TrainItem, responses with
rollout log-probs) must decode field by field equal to what was sent, its tensors bit-identical with their dtypes,
and the decoded group must give the training forward exactly the same log-probabilities as the original.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch

from vbench_async.backends.base import ImageInput, Request, SamplingParams, VideoInput
from vbench_async.samples import Sample
from vbench_async.train.data import TrainItem
from vbench_async.train.policy import Encoded, Policy, collate, encode, forward_batch
from vbench_async.train.rollout import Group, Response
from vbench_async.train.wire import VERSION, WireError, decode_groups, encode_groups, portable

SIDE = 56


@pytest.fixture(scope="module")
def backend():
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    b = HFBackend(str(ensure_tiny_model("tiny-qwen2.5-vl")))
    asyncio.run(b.start())
    return b


def _request() -> Request:
    rng = np.random.default_rng(0)
    meta = dict(fps=10.0, duration=2.0, total_num_frames=20, frames_indices=[0, 6, 13, 19], width=SIDE, height=SIDE)
    video = VideoInput(rng.integers(0, 255, (4, SIDE, SIDE, 3), dtype=np.uint8), meta, "v")
    image = ImageInput(rng.integers(0, 255, (SIDE, SIDE, 3), dtype=np.uint8), "i")
    return Request("step3-r1-7", "Describe the video and the image.", videos=(video,), images=(image,),
                   sampling=SamplingParams(temperature=1.0, top_p=0.9, top_k=5, max_tokens=8, seed=12345), n=3)


def _item() -> TrainItem:
    sample = Sample("mmvu", "q7", "multiple choice", "Which? ünïcödé", "<answer>B</answer>",
                    options=("A. one", "B. two"), video="clips/a.mp4", window=(1.5, None), images=("i.png",),
                    fields={"duration": 12.5, "tags": ["x", "y"], "nested": {"a": None}})
    return TrainItem(7, sample, "Describe the video and the image.", video=Path("/data/clips/a.mp4"),
                     window=(1.5, None), images=(Path("/data/i.png"),), offline=("<answer>B</answer>",))


def _group(encoded: Encoded) -> Group:
    responses = [
        Response([5, 6, 7], "abc", reward=1.0, accuracy=1.0, format=1.0, rollout_logp=[-0.1, -1 / 3, -1e-300]),
        Response([8], "d", finished=False, reward=0.1, rollout_logp=[float("-inf")]),
        Response([9, 10, 11], "<answer>B</answer>", offline=True, reward=0.7, accuracy=0.5, format=0.9),
        Response([], "", finished=False),  # empty: a row cut before its first token
    ]
    return Group(item=_item(), request=_request(), responses=responses, advantages=[1.2, -0.3, 0.1, -1 / 7],
                 encoded=encoded)


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and _bytes(a) == _bytes(b)


def _assert_same(got: Group, sent: Group) -> None:
    assert got.item == sent.item and got.request == sent.request
    assert got.advantages == sent.advantages
    assert len(got.responses) == len(sent.responses)
    for r, s in zip(got.responses, sent.responses):  # floats compared by their bits (-inf included)
        assert (r.token_ids, r.text, r.offline, r.finished) == (s.token_ids, s.text, s.offline, s.finished)
        assert (r.reward, r.accuracy, r.format) == (s.reward, s.accuracy, s.format)
        assert r.rollout_logp == s.rollout_logp  # exact: float64 on the wire (-inf included)
        assert all(type(x) is int for x in r.token_ids)
    assert list(got.encoded.media) == list(sent.encoded.media)
    assert _same_tensor(got.encoded.input_ids, sent.encoded.input_ids)
    assert (got.encoded.token_types is None) == (sent.encoded.token_types is None)
    if sent.encoded.token_types is not None:
        assert _same_tensor(got.encoded.token_types, sent.encoded.token_types)
    for key, t in sent.encoded.media.items():
        assert _same_tensor(got.encoded.media[key], t), key


def test_a_real_group_round_trips_field_by_field(backend):
    group = _group(encode(backend.inputs(_request())))
    assert {"pixel_values", "pixel_values_videos", "image_grid_thw", "video_grid_thw"} <= set(group.encoded.media)
    sent = portable(group)
    assert sent.request.videos == () and group.request.videos  # the original keeps its media
    blob = encode_groups([sent, sent])
    got = decode_groups(blob)
    assert len(got) == 2
    for g in got:
        _assert_same(g, sent)
    assert encode_groups(got) == blob  # deterministic: re-encoding gives the same bytes


def test_the_received_group_trains_identically(backend):
    """The training forward on the decoded group (media stripped) gives bit-identical log-probs."""
    group = _group(encode(backend.inputs(_request())))
    (got,) = decode_groups(encode_groups([portable(group)]))
    pad = backend.processor.tokenizer.pad_token_id
    rows = [r.token_ids for r in group.responses if r.token_ids]
    policy = Policy(backend.model)
    with torch.no_grad():
        want = forward_batch(policy, collate([group.encoded] * len(rows), rows, pad), 1.0)[0]
        have = forward_batch(policy, collate([got.encoded] * len(rows), rows, pad), 1.0)[0]
    assert torch.equal(want, have)
    for r, s in zip(got.responses, group.responses):  # the trainer's rollout log-prob tensors too
        if s.rollout_logp is not None:
            assert torch.equal(torch.tensor(r.rollout_logp), torch.tensor(s.rollout_logp))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32,
                                   torch.int64, torch.uint8, torch.bool])
def test_every_dtype_and_view_keeps_its_bytes(dtype):
    base = (torch.arange(24, dtype=torch.float64) * 0.37 - 4).reshape(4, 6).to(dtype)
    if dtype.is_floating_point:
        base[0, 0], base[0, 1] = float("nan"), float("-inf")
    view = base.t()[1:]  # non-contiguous, sharing storage with `base`
    enc = Encoded(torch.arange(3), None, {"pixel_values": base, "image_grid_thw": view, "empty": base[:0]})
    sent = Group(item=_item(), request=Request("r", "p"), responses=[], advantages=[], encoded=enc)
    (got,) = decode_groups(encode_groups([sent]))
    assert got.item == sent.item and got.responses == [] and got.advantages == [] and got.encoded.token_types is None
    for key, t in enc.media.items():
        assert _same_tensor(got.encoded.media[key], t), key


def test_a_group_without_an_encoded_prompt_and_an_empty_message():
    sent = Group(item=_item(), request=Request("r", "p"), responses=[Response([1], "a")], advantages=[0.0])
    (got,) = decode_groups(encode_groups([sent]))
    assert got == sent
    assert decode_groups(encode_groups([])) == []


def test_media_never_travel_and_bad_messages_are_refused():
    with pytest.raises(ValueError, match="still holds its media"):
        encode_groups([Group(item=_item(), request=_request())])
    blob = encode_groups([Group(item=_item(), request=Request("r", "p"))])
    head = blob[8:8 + int.from_bytes(blob[:8], "little")]
    assert f'"version":{VERSION}'.encode() in head
    other = blob.replace(f'"version":{VERSION}'.encode(), f'"version":{VERSION + 1}'.encode())
    with pytest.raises(WireError, match="wire version"):
        decode_groups(other)
    with pytest.raises(WireError):
        decode_groups(b"\x03")
    with pytest.raises(WireError):
        decode_groups(len(b"[]").to_bytes(8, "little") + b"[]")
