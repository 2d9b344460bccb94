"""The trainer's start-up check that training sees the pixels (vbench_async/train/vision_check.py).

On transformers 5.17 the Qwen-VL forward did not know `mm_encoder_outputs` (the vision features the training forward
hands it) and dropped it in **kwargs: log-probs did not depend on the pixels, the vision tower got no gradient, and
training "passed" blind. Here: the check passes on the tiny random-weight Qwen2.5-VL and Qwen3-VL models, leaves no
trace (gradients None, weights and the random state unchanged), and a policy whose forward drops the argument (that
transformers, simulated) is refused, by the check and by a real trainer start, with a message naming the cause.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml

from vbench_async.backends.base import ImageInput, Request, VideoInput
from vbench_async.errors import UserError
from vbench_async.train.fsdp import DistInfo
from vbench_async.train.policy import Policy
from vbench_async.train.vision_check import (
    TESTED_TRANSFORMERS,
    measure,
    probe_batch,
    refusal,
    replaced_pixels,
    startup_check,
)

REPO = Path(__file__).resolve().parents[1]
SIDES = {"tiny-qwen2.5-vl": 56, "tiny-qwen3-vl": 64}
CPU = DistInfo(rank=0, world=1, local_rank=0, device=torch.device("cpu"))


@pytest.fixture(scope="module", params=list(SIDES))
def backend(request):
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model

    b = HFBackend(str(ensure_tiny_model(request.param)))
    asyncio.run(b.start())
    b.side = SIDES[request.param]
    b.model.train()  # as the trainer holds it
    return b


def _video(side: int) -> VideoInput:
    frames = np.random.default_rng(0).integers(0, 255, (4, side, side, 3), dtype=np.uint8)
    meta = dict(fps=10.0, duration=2.0, total_num_frames=20, frames_indices=[0, 6, 13, 19], width=side, height=side)
    return VideoInput(frames, meta, "v")


class _Media:
    """A stand-in for the trainer's MediaSource: each item's request from memory (None: the media cannot load)."""

    def __init__(self, side: int):
        self.side = side

    def request(self, item, sampling, n, request_id):
        from vbench_async.errors import SampleError

        if item.video == "broken":
            raise SampleError("decode_error", "cannot decode")
        videos = (_video(self.side),) if item.video else ()
        images = (ImageInput(np.full((self.side, self.side, 3), 99, np.uint8), "i"),) if item.images else ()
        return Request(request_id, "What moves?", videos=videos, images=images, sampling=sampling, n=n)


def _item(index: int, video=None, images=()):
    return SimpleNamespace(index=index, video=video, images=images, sample=SimpleNamespace(key=f"s{index}"))


def _batch(backend, items=None):
    items = items or [_item(0), _item(1, video="v.mp4")]
    built = probe_batch(items, _Media(backend.side), backend.inputs, backend.processor.tokenizer)
    assert built is not None
    return built


def _blind(monkeypatch, model) -> None:
    """The model's forward as on transformers 5.17: `mm_encoder_outputs` is accepted and ignored."""
    forward = model.forward

    def dropping(*args, **kwargs):
        kwargs.pop("mm_encoder_outputs", None)
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", dropping)


def test_the_check_passes_on_the_tiny_models_and_leaves_no_trace(backend):
    batch, key = _batch(backend)
    assert key == "s1" and "video_pixels" in batch.media and batch.response_mask.sum() > 0
    model = backend.model
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    rng = torch.get_rng_state()
    signal = measure(Policy(model), batch, CPU, probe=key)
    assert signal.ok, signal.summary()
    assert signal.logp_diff > 1e-6 and signal.grad_nonzero > 0
    assert all(p.grad is None for p in model.parameters())  # what the first optimizer step starts from
    assert all(torch.equal(weights[n], p) for n, p in model.named_parameters())
    assert torch.equal(rng, torch.get_rng_state())
    # The same signal again: nothing the first probe did changed the second.
    assert measure(Policy(model), batch, CPU).logp_diff == signal.logp_diff


def test_replaced_pixels_differ_everywhere_and_keep_the_rest(backend):
    batch, _ = _batch(backend)
    other = replaced_pixels(batch)
    px, new = batch.media["video_pixels"], other.media["video_pixels"]
    assert new.shape == px.shape and bool((new > px).all())
    assert all(torch.equal(other.media[k], v) for k, v in batch.media.items() if not k.endswith("_pixels"))
    assert torch.equal(other.input_ids, batch.input_ids)


def test_a_policy_that_drops_the_vision_features_is_refused(backend, monkeypatch):
    import transformers

    batch, key = _batch(backend)
    _blind(monkeypatch, backend.model)
    signal = measure(Policy(backend.model), batch, CPU, probe=key)
    assert not signal.ok and signal.logp_diff == 0.0 and signal.grad_nonzero == 0
    assert all(p.grad is None for p in backend.model.parameters())
    message = refusal(signal)
    assert f"transformers {transformers.__version__}" in message and "mm_encoder_outputs" in message
    assert TESTED_TRANSFORMERS in message and "did not change" in message and "gradient" in message
    # The trainer's entry point: the same probe, refused with a UserError.
    with pytest.raises(UserError, match=r"ignores `mm_encoder_outputs`"):
        startup_check(Policy(backend.model), [_item(0, video="v.mp4")], _Media(backend.side), backend.model_path, CPU)


def test_a_frozen_vision_tower_is_checked_by_its_log_probs_alone(backend, monkeypatch):
    batch, key = _batch(backend)
    model = backend.model
    model.model.visual.requires_grad_(False)
    try:
        signal = measure(Policy(model), batch, CPU, check_grad=True, probe=key)
        assert signal.ok and signal.grad_nonzero is None
        _blind(monkeypatch, model)
        blind = measure(Policy(model), batch, CPU, probe=key)
        assert not blind.ok and not blind.pixels_matter and blind.vision_trains
    finally:
        model.model.visual.requires_grad_(True)
    assert all(p.grad is None for p in model.parameters())


def test_the_startup_check_probes_the_first_loadable_visual_item_or_skips(backend, caplog):
    media = _Media(backend.side)
    items = [_item(0), _item(1, images=("a.png",)), _item(2, video="broken"), _item(3, video="v.mp4")]
    # Videos first (an image only where no video loads); an item that cannot load is passed over.
    signal = startup_check(Policy(backend.model), items, media, backend.model_path, CPU)
    assert signal is not None and signal.ok and signal.probe == "s3"
    signal = startup_check(Policy(backend.model), items[:3], media, backend.model_path, CPU)
    assert signal is not None and signal.ok and signal.probe == "s1" and signal.grad_nonzero > 0
    with caplog.at_level("INFO", logger="vbench_async.train.vision_check"):
        assert startup_check(Policy(backend.model), [_item(0)], media, backend.model_path, CPU) is None
    assert "no image or video" in caplog.text
    assert all(p.grad is None for p in backend.model.parameters())


def test_the_refusal_says_what_was_seen():
    from vbench_async.train.vision_check import VisionSignal

    grads_only = refusal(VisionSignal("k", 0.25, 0))
    assert "no vision-tower parameter" in grads_only and "did not change" not in grads_only
    assert "ignores `mm_encoder_outputs`" in grads_only
    logp_only = refusal(VisionSignal("k", 0.0, None))  # a frozen tower: the log-probs alone
    assert "did not change" in logp_only and "gradient" not in logp_only
    assert "not finite" in refusal(VisionSignal("k", -1.0, 3)) and not VisionSignal("k", -1.0, 3).ok


def test_the_tested_transformers_is_what_pyproject_requires_and_what_is_installed():
    import transformers
    from packaging.requirements import Requirement

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    required = [Requirement(d) for d in deps if re.match(r"transformers\b", d)]
    assert len(required) == 1 and Requirement(TESTED_TRANSFORMERS).specifier == required[0].specifier
    assert required[0].specifier.contains(transformers.__version__)


# -------------------------------------------------------------------------------------- a real trainer start

_START = """
import sys, transformers
import vbench_async.train.trainer as trainer
from vbench_async.process_exit import exit_now
from vbench_async.train.__main__ import main

def said_positions(model, _swap=trainer.use_release_positions):  # what the trainer's own call did, on stderr
    applied = _swap(model)
    print(f"release positions: {type(model).__name__} {applied}", file=sys.stderr)
    return applied
trainer.use_release_positions = said_positions

if sys.argv[2] == "blind":
    for name in ("Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration"):
        cls = getattr(transformers, name)
        def forward(self, *args, _forward=cls.forward, **kwargs):  # as on transformers 5.17: accepted, ignored
            kwargs.pop("mm_encoder_outputs", None)
            return _forward(self, *args, **kwargs)
        cls.forward = forward
exit_now(main(["--config", sys.argv[1]]))
"""


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`python -m vbench_async.train` for one step on a video and a text record (the forward made blind or not)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.videos import write_video

    write_video(tmp_path / "v.mp4", frames=20, fps=10, width=64, height=64)
    (tmp_path / "train.json").write_text(json.dumps([
        {"problem_id": "t0", "problem": "Is it a number?", "problem_type": "yes/no", "solution": "<answer>No</answer>"},
        {"problem_id": "v0", "problem": "Does it move?", "problem_type": "yes/no", "solution": "<answer>Yes</answer>",
         "path": "v.mp4"}]))
    out = tmp_path / "out"
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump({
        "model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 0,
        "data": {"records": str(tmp_path / "train.json"), "cache_dir": str(tmp_path / "cache"),
                 "frames": {"max_frames": 4, "max_pixels": 3136}, "decode_workers": 1},
        "rollout": {"n": 2, "max_tokens": 4},
        "train": {"steps": 1, "prompts_per_step": 2, "micro_batch_size": 4},
        "checkpoint": {"every": 0, "export": False}, "logging": {"progress": False}}))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_START), str(config), mode], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)
    return proc, out


def test_a_trainer_start_refuses_a_policy_blind_to_the_video(tmp_path):
    """With the HF forward dropping the vision features the run stops before step 1 (exit code 2) with the message,
    having written no metrics."""
    proc, out = _start(tmp_path, "blind")
    assert proc.returncode == 2, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "vbench-async train: error: training would not see the images or videos" in proc.stderr
    assert "ignores `mm_encoder_outputs`" in proc.stderr and TESTED_TRANSFORMERS in proc.stderr
    assert not (out / "metrics.jsonl").exists()
    # the policy got the release's positions after a video (families/release_positions.py), as vLLM rollouts have them
    assert "release positions: Qwen2_5_VLForConditionalGeneration True" in proc.stderr


@pytest.mark.slow
def test_a_trainer_start_passes_the_check_and_trains(tmp_path):
    """The installed transformers: the check passes (logged), and the step and the final checkpoint follow (the
    probe leaves FSDP's sharded parameters registered, which the optimizer and the checkpoint rely on). Slow: every
    default-suite training on video data (tests/test_train_fsdp.py, test_train_learning.py, ...) runs the same path."""
    proc, out = _start(tmp_path, "wired")
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert re.search(r"vision check passed .*probe train/v0: replacing the pixels changes the log-probs", proc.stderr)
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    assert (out / "checkpoints" / "step-000001").is_dir()
