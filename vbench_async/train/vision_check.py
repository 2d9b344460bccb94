"""The start-up check that training sees the pixels: the trainer refuses a policy whose vision tower takes no part.

`train/policy.py` runs the vision tower itself and hands its outputs to the Hugging Face Qwen-VL forward as
`mm_encoder_outputs`. A transformers release whose forward does not know that argument (5.17, for one) takes it into
`**kwargs` and drops it without a word: the model then reads the video placeholder tokens as plain text, log-probs do
not depend on the pixels, the vision parameters get no gradient, and a whole training runs blind to the videos.

Before step 1, on every rank alike (the same forwards, so the FSDP collectives stay aligned), one tiny probe:
one prompt with the first usable visual item of the training data (a video; an image where no item has a video) and
a few response tokens:
  1. forward with the real pixels and one backward of the response log-probs: some vision-tower parameter
     (`model.model.visual`) must receive a non-zero gradient (not checked with `train.freeze_vision`);
  2. forward (no gradient) with the pixels replaced by a constant above every real value: the log-probs must change.
The gradients are then set back to None (what the first optimizer step starts from anyway); no optimizer step, no
weight or optimizer-state change, no random numbers drawn, so the training is numerically the same as without it.
A data set without any image or video skips the check with a log line. A failure is a `UserError` that names the
installed transformers version and the tested one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..backends.base import SamplingParams
from ..errors import SampleError, UserError
from .fsdp import DistInfo, all_reduce, replica_sync
from .policy import MicroBatch, collate, encode, forward_batch

log = logging.getLogger(__name__)

# The transformers the project is tested with (pyproject.toml's requirement; tests/test_train_vision_check.py keeps
# the two equal).
TESTED_TRANSFORMERS = "transformers>=5.19,<5.20"
PROBE_TEXT = "The answer is B."  # the response whose log-probs are compared (its first PROBE_TOKENS tokens)
PROBE_TOKENS = 4
PROBE_CANDIDATES = 8  # visual items tried, in data order, for one whose media can be loaded


@dataclass
class VisionSignal:
    """What the probe measured (the same on every rank: reduced over ranks)."""

    probe: str  # the sample key of the probe item
    logp_diff: float  # largest |change| of a response token's log-prob when the pixels are replaced (-1: NaN/inf)
    grad_nonzero: int | None  # non-zero gradient elements of the vision parameters (None: not checked)
    seconds: float = 0.0

    @property
    def pixels_matter(self) -> bool:
        return self.logp_diff > 0.0  # -1: the log-probs were not finite

    @property
    def vision_trains(self) -> bool:
        return self.grad_nonzero is None or self.grad_nonzero > 0

    @property
    def ok(self) -> bool:
        return self.pixels_matter and self.vision_trains

    def summary(self) -> str:
        grads = "not checked (frozen)" if self.grad_nonzero is None else str(self.grad_nonzero)
        return (f"probe {self.probe}: replacing the pixels changes the log-probs by up to {self.logp_diff:.3g}; "
                f"non-zero vision-tower gradient elements: {grads}")


def replaced_pixels(batch: MicroBatch) -> MicroBatch:
    """The same micro-batch with every image and video pixel replaced by one constant above all real values."""
    media = {k: torch.full_like(v, float(v.max()) + 1.0) if k.endswith("_pixels") else v
             for k, v in batch.media.items()}
    return dataclasses.replace(batch, media=media)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t  # an FSDP2 gradient is a DTensor: this rank's shard


def _reshard(policy: nn.Module) -> None:
    """Register the sharded parameters again everywhere: FSDP2 keeps the root's unsharded after a forward (for the
    backward that usually follows), and an optimizer built now must see the sharded ones, as without the probe."""
    from torch.distributed.fsdp import FSDPModule

    for module in policy.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def measure(policy: nn.Module, batch: MicroBatch, info: DistInfo | None = None, check_grad: bool = True,
            probe: str = "probe") -> VisionSignal:
    """Run the probe on `batch` (on the policy's device; it must hold pixels). Every rank must call it alike.

    Leaves every gradient of `policy` None. `check_grad` False (frozen vision tower): forwards only."""
    if not any(k.endswith("_pixels") for k in batch.media):
        raise ValueError("the vision probe needs a micro-batch with an image or a video")
    started = time.perf_counter()
    model = policy.model
    visual = list(model.model.visual.parameters())
    mask = batch.response_mask
    params = [p for p in policy.parameters() if p.requires_grad]
    check_grad = check_grad and any(p.requires_grad for p in visual)
    grads_before = [p.grad for p in params]
    if any(g is not None for g in grads_before):
        raise RuntimeError("the vision probe needs a policy without gradients (it leaves them None)")
    try:
        nonzero: int | None = None
        if check_grad:
            replica_sync(policy, True)
            with torch.enable_grad():
                logp, _, _ = forward_batch(policy, batch, 1.0)
                (logp * mask).sum().backward()
            real = logp.detach()
            nonzero = sum(int(torch.count_nonzero(_local(p.grad))) for p in visual if p.grad is not None)
        else:
            with torch.no_grad():
                real = forward_batch(policy, batch, 1.0)[0]
        with torch.no_grad():
            other = forward_batch(policy, replaced_pixels(batch), 1.0)[0]
    finally:
        for p in params:
            p.grad = None
        _reshard(policy)
    diff = ((real.float() - other.float()).abs() * mask).max().item()
    if not torch.isfinite(torch.tensor(diff)):
        diff = -1.0  # non-finite log-probs: no evidence either way (a failure, said as such)
    if info is not None and info.world > 1:  # one decision on every rank
        diff = all_reduce([diff], info, "max")[0]
        if nonzero is not None:
            nonzero = int(all_reduce([float(nonzero)], info, "sum")[0])
    return VisionSignal(probe, diff, nonzero, time.perf_counter() - started)


def refusal(signal: VisionSignal) -> str:
    """The message of a failed check: what was seen, the likely cause, what to do."""
    import transformers

    if signal.logp_diff < 0:
        return (f"the policy's log-probs on the vision probe ({signal.probe}) are not finite, so whether training "
                "sees the images and videos cannot be checked: the weights or train.dtype give NaN/inf before any "
                "step; check the model checkpoint")
    seen = []
    if not signal.pixels_matter:
        seen.append("the policy's log-probs of the probe's response tokens did not change when its pixels were "
                    f"replaced (largest change {signal.logp_diff:.3g})")
    if not signal.vision_trains:
        seen.append("no vision-tower parameter (model.model.visual) received a non-zero gradient")
    return (f"training would not see the images or videos: on probe item {signal.probe}, " + " and ".join(seen)
            + f". The likely cause: the installed transformers {transformers.__version__}, whose Qwen-VL forward "
            "ignores `mm_encoder_outputs` (the vision features vbench_async/train/policy.py passes it; some "
            "releases, 5.17 among them, take it into **kwargs and drop it). Install the tested version: "
            f"pip install '{TESTED_TRANSFORMERS}' (pyproject.toml; README: Tested versions).")


def probe_batch(items: list[Any], media: Any, processor: Any, tokenizer: Any) -> tuple[MicroBatch, str] | None:
    """One prompt with the first loadable visual item (videos first) and PROBE_TOKENS response tokens, or None."""
    visual = [it for it in items if it.video] + [it for it in items if not it.video and it.images]
    for item in visual[:PROBE_CANDIDATES]:
        try:
            req = media.request(item, SamplingParams(), 1, f"vision-probe-{item.index}")
            encoded = encode(processor(req))
        except SampleError as exc:
            log.warning("vision check: %s cannot be loaded (%s: %s); trying the next visual item", item.sample.key,
                        exc.kind, exc)
            continue
        response = tokenizer.encode(PROBE_TEXT, add_special_tokens=False)[:PROBE_TOKENS] or [0]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        return collate([encoded], [response], pad), item.sample.key
    return None


def startup_check(policy: nn.Module, items: list[Any], media: Any, model_dir: str, info: DistInfo,
                  check_grad: bool = True) -> VisionSignal | None:
    """The trainer's check before step 1 (every rank calls it alike). Raises UserError when the policy is blind;
    returns None (and logs why) when the data has no image or video."""
    if not any(it.video or it.images for it in items):
        if info.main:
            log.info("vision check skipped: the training data has no image or video item")
        return None
    from transformers import AutoProcessor

    from ..backends.hf import HFBackend

    encoder = HFBackend(model_dir)  # prompt encoding only, as the rollout engines' `inputs` (no model loaded)
    encoder.processor = AutoProcessor.from_pretrained(model_dir)
    built = probe_batch(items, media, encoder.inputs, encoder.processor.tokenizer)
    # Every rank runs the probe or none does (a rank whose visual items all fail to load would otherwise skip
    # forwards that the others run as collectives).
    if all_reduce([1.0 if built is not None else 0.0], info, "min")[0] == 0.0:
        log.warning("vision check skipped: no visual item among the first %d could be loaded (on some rank)",
                    PROBE_CANDIDATES)
        return None
    assert built is not None
    batch, key = built
    signal = measure(policy, batch.to(info.device), info, check_grad=check_grad, probe=key)
    if not signal.ok:
        raise UserError(refusal(signal))
    if info.main:
        log.info("vision check passed (%.1f s): %s", signal.seconds, signal.summary())
    return signal
