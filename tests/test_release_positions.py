"""The M-RoPE positions the `hf` backend and the trainer give a Qwen2-VL / Qwen2.5-VL prompt with a video equal vLLM's
(vbench_async/families/release_positions.py): computed by the tiny models' real transformers classes with the swapped
method, against vLLM's own `get_mrope_input_positions` for the same layout, on a batch with left padding."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

TEXT_BEFORE, TEXT_AFTER = 5, 7
# (grid t, h, w) in patches: h, w divisible by the merge size 2; seconds per temporal patch
VIDEO, IMAGE, SECONDS = (8, 4, 6), (1, 4, 4), 2.0


def _model(name: str):
    from transformers import AutoModelForImageTextToText

    from vbench_async.demo.tiny_models import ensure_tiny_model

    return AutoModelForImageTextToText.from_pretrained(ensure_tiny_model(name)).eval()


def _layout(merge: int) -> tuple[list[int], list[tuple[int, tuple[int, int, int], str]]]:
    """Token types of: text, an image, text, a video, text; and each vision block's (offset, grid, modality)."""
    blocks = [(1, IMAGE, "image"), (2, VIDEO, "video")]
    types_, spans = [], []
    for kind, grid, modality in blocks:
        types_ += [0] * TEXT_BEFORE
        spans.append((len(types_), grid, modality))
        types_ += [kind] * (grid[0] * grid[1] * grid[2] // merge**2)
    return types_ + [0] * TEXT_AFTER, spans


def _vllm_positions(model, spans, length: int, family: str) -> torch.Tensor:
    """vLLM's own rule (its model class's method), fed the blocks the way its `iter_mm_grid_thw` yields them."""
    if family == "qwen2.5":
        from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration as VLLMModel
    else:
        from vllm.model_executor.models.qwen2_vl import Qwen2VLForConditionalGeneration as VLLMModel
    vision = model.config.vision_config
    merge, per_second = vision.spatial_merge_size, getattr(vision, "tokens_per_second", None)

    def grids(_features):
        for offset, (t, h, w), modality in spans:
            factor = SECONDS * per_second if modality == "video" and per_second is not None else 1.0
            yield offset, t, h // merge, w // merge, factor

    stand_in = types.SimpleNamespace(iter_mm_grid_thw=grids, config=model.config)
    positions, _delta = VLLMModel.get_mrope_input_positions(stand_in, [0] * length, [])
    return positions


@pytest.mark.parametrize("name,family", [("tiny-qwen2.5-vl", "qwen2.5"), ("tiny-qwen2-vl", "qwen2")])
def test_text_after_a_video_continues_where_vllm_puts_it(name: str, family: str) -> None:
    from vbench_async.families.release_positions import use_release_positions

    model = _model(name)
    merge = model.config.vision_config.spatial_merge_size
    kinds, spans = _layout(merge)
    pad = 3  # a second, left-padded row: the positions of the kept tokens are the same
    token_types = torch.tensor([kinds, [0] * pad + kinds[:-pad]])
    mask = torch.tensor([[1] * len(kinds), [0] * pad + [1] * (len(kinds) - pad)])
    grid = {"image_grid_thw": torch.tensor([IMAGE, IMAGE]), "video_grid_thw": torch.tensor([VIDEO, VIDEO])}
    if family == "qwen2.5":
        grid["second_per_grid_ts"] = torch.tensor([SECONDS, SECONDS])
    ids = torch.zeros_like(token_types)
    before, _ = model.model.get_rope_index(ids, mm_token_type_ids=token_types, attention_mask=mask, **grid)
    assert use_release_positions(model)
    after, deltas = model.model.get_rope_index(ids, mm_token_type_ids=token_types, attention_mask=mask, **grid)
    expected = _vllm_positions(model, spans, len(kinds), family)
    assert torch.equal(after[:, 0], expected)
    assert torch.equal(after[:, 1, pad:], expected[:, : len(kinds) - pad])  # padding moves nothing
    assert deltas[0].item() == int(expected.max()) + 1 - len(kinds)
    first_after_video = spans[1][0] + VIDEO[0] * VIDEO[1] * VIDEO[2] // merge**2
    # what the swap repairs (transformers 5.19): the text after the video started before the video's end
    assert before[0, 0, first_after_video] < after[0, 0, first_after_video] == after[0, 0].max() - TEXT_AFTER + 1
    assert torch.equal(before[:, 0, :first_after_video], after[:, 0, :first_after_video])  # up to the video's end


def test_other_families_are_left_as_they_are() -> None:
    from vbench_async.families.release_positions import use_release_positions

    model = _model("tiny-qwen3-vl")
    method = model.model.get_rope_index
    assert not use_release_positions(model) and model.model.get_rope_index == method


def test_the_hf_backend_loads_qwen2_5_vl_with_the_release_positions() -> None:
    # The backend's own load, not a copy of it: dropping the swap there would put the question after a video elsewhere
    # than vLLM does (seeing-qwen2.5-vl's `when` fell from 100 to 81 between the two paths).
    from vbench_async.backends.hf import HFBackend
    from vbench_async.demo.tiny_models import ensure_tiny_model
    from vbench_async.families.release_positions import release_rope_index

    backend = HFBackend(str(ensure_tiny_model("tiny-qwen2.5-vl")), device="cpu")
    backend._load()
    assert backend.model.model.get_rope_index.__func__ is release_rope_index
