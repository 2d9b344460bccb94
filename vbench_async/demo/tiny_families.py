"""Tiny random-weight checkpoints of the non-Qwen families (InternVL, LLaVA-OneVision, GLM-4.1V), built locally.

Same ground rules as the Qwen ones (tiny_models.py): the locally trained BPE, 2 text layers of hidden 128 with 64-wide
heads (vLLM's CPU attention), weights seeded and stored in bfloat16, and each family's real special tokens and chat
template shape, so the processors, vLLM and transformers take the same code paths as for the released checkpoints.
The vision towers take 112 px frames (8 x 8 patches of 14): a few dozen visual tokens per frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

SIDE, PATCH = 112, 14
_TEXT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=32768)
_VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)

# Chat templates in the shape of each family's released template (media first, then the question).
_INTERNVL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的多模态大语言模型。<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'video' %}<video>\n{% elif 'text' in part %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_LLAVA_TEMPLATE = (  # llava-hf's: role, a space, images, videos, then "\n" + each text part
    "{% for message in messages %}<|im_start|>{{ message['role'] }} {% if message['content'] is string %}\n"
    "{{ message['content'] }}{% else %}{% for part in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "<image>{% endfor %}{% for part in message['content'] | selectattr('type', 'equalto', 'video') %}<video>"
    "{% endfor %}{% for part in message['content'] | selectattr('type', 'equalto', 'text') %}\n{{ part['text'] }}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_GLM_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|begin_of_image|><|image|><|end_of_image|>{% elif part['type'] == 'video' %}"
    "<|begin_of_video|><|video|><|end_of_video|>{% elif 'text' in part %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _tokenizer(extra: tuple[str, ...]) -> Any:
    from transformers import AddedToken

    from .tiny_tokenizer import build_tokenizer

    tok = build_tokenizer(seed=0)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True, normalized=False)
                                                          for t in extra]}, replace_extra_special_tokens=False)
    return tok


def _text(tok: Any, **extra: Any) -> dict[str, Any]:
    ids = tok.convert_tokens_to_ids
    return dict(_TEXT, vocab_size=len(tok), eos_token_id=ids(tok.eos_token), pad_token_id=ids("<|endoftext|>"),
                **extra)


def _save(model: Any, processor: Any, tok: Any, out: Path, seed: int, stops: tuple[str, ...]) -> None:
    import torch
    import transformers

    ids = tok.convert_tokens_to_ids
    model = model.eval().to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=[ids(t) for t in stops], pad_token_id=ids("<|endoftext|>"), do_sample=False)
    model.save_pretrained(out)
    processor.save_pretrained(out)


def _internvl(out: Path, seed: int) -> None:
    import torch
    import transformers

    tok = _tokenizer(("<img>", "</img>", "<IMG_CONTEXT>", "<video>"))
    # The attribute names InternVLProcessor reads from its tokenizer (saved as extra special tokens).
    tok._set_model_specific_special_tokens({"start_image_token": "<img>", "end_image_token": "</img>",
                                            "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"})
    seq = (SIDE // PATCH) ** 2 // 4  # pixel shuffle with downsample ratio 0.5
    config = transformers.InternVLConfig(
        text_config=_text(tok, model_type="qwen2", bos_token_id=None),
        vision_config=dict(_VISION, image_size=SIDE, patch_size=PATCH),
        image_token_id=tok.convert_tokens_to_ids("<IMG_CONTEXT>"), image_seq_length=seq)
    torch.manual_seed(seed)
    model = transformers.InternVLForConditionalGeneration(config)
    size = {"height": SIDE, "width": SIDE}
    processor = transformers.InternVLProcessor(
        image_processor=transformers.GotOcr2ImageProcessor(size=size, crop_to_patches=True, max_patches=4),
        tokenizer=tok, video_processor=transformers.InternVLVideoProcessor(size=size), image_seq_length=seq,
        chat_template=_INTERNVL_TEMPLATE)
    _save(model, processor, tok, out, seed, ("<|im_end|>", "<|endoftext|>"))


def _llava_onevision(out: Path, seed: int) -> None:
    import torch
    import transformers

    tok = _tokenizer(("<image>", "<video>"))
    ids = tok.convert_tokens_to_ids
    pinpoints = [[SIDE, SIDE], [SIDE, 2 * SIDE], [2 * SIDE, SIDE], [2 * SIDE, 2 * SIDE]]
    config = transformers.LlavaOnevisionConfig(
        text_config=_text(tok, model_type="qwen2", bos_token_id=None),
        vision_config=dict(_VISION, model_type="siglip_vision_model", image_size=SIDE, patch_size=PATCH),
        image_token_index=ids("<image>"), video_token_index=ids("<video>"), image_grid_pinpoints=pinpoints,
        vision_feature_layer=-1, vision_feature_select_strategy="full")
    torch.manual_seed(seed)
    model = transformers.LlavaOnevisionForConditionalGeneration(config)
    size = {"height": SIDE, "width": SIDE}
    processor = transformers.LlavaOnevisionProcessor(
        image_processor=transformers.LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=pinpoints),
        tokenizer=tok, video_processor=transformers.LlavaOnevisionVideoProcessor(size=size),
        num_image_tokens=(SIDE // PATCH) ** 2, vision_feature_select_strategy="full", chat_template=_LLAVA_TEMPLATE)
    _save(model, processor, tok, out, seed, ("<|im_end|>", "<|endoftext|>"))
    _nest_siglip_weights(out)


def _nest_siglip_weights(out: Path) -> None:
    """transformers 5 saves the SigLIP tower as `vision_tower.*`; the released checkpoints (and vLLM's loader) have
    `vision_tower.vision_model.*`, which transformers also loads. Write that layout."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    path = out / "model.safetensors"
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    nested = {("vision_tower.vision_model." + k.removeprefix("vision_tower.")
               if k.startswith("vision_tower.") and not k.startswith("vision_tower.vision_model.") else k): v
              for k, v in tensors.items()}
    save_file(nested, str(path), metadata=metadata)


def _glm4v(out: Path, seed: int) -> None:
    import torch
    import transformers

    tok = _tokenizer(("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|image|>", "<|video|>",
                      "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"))
    tok.eos_token = "<|user|>"  # GLM stops when the model starts the next user turn
    ids = tok.convert_tokens_to_ids
    # Rotary on half of each 64-wide head: the three M-RoPE sections sum to 16.
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6], "partial_rotary_factor": 0.5}
    config = transformers.Glm4vConfig(
        text_config=_text(tok, rope_parameters=rope),
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                           patch_size=PATCH, image_size=SIDE, spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=ids("<|image|>"), video_token_id=ids("<|video|>"),
        image_start_token_id=ids("<|begin_of_image|>"), image_end_token_id=ids("<|end_of_image|>"),
        video_start_token_id=ids("<|begin_of_video|>"), video_end_token_id=ids("<|end_of_video|>"))
    torch.manual_seed(seed)
    model = transformers.Glm4vForConditionalGeneration(config)
    factor = PATCH * 2
    processor = transformers.Glm4vProcessor(
        image_processor=transformers.Glm4vImageProcessor(
            size={"shortest_edge": factor * factor * 4, "longest_edge": factor * factor * 256}, patch_size=PATCH,
            merge_size=2, temporal_patch_size=2),
        tokenizer=tok, chat_template=_GLM_TEMPLATE,
        video_processor=transformers.Glm4vVideoProcessor(
            size={"shortest_edge": factor * factor * 4, "longest_edge": factor * factor * 2 * 64}, patch_size=PATCH,
            merge_size=2, temporal_patch_size=2))
    _save(model, processor, tok, out, seed, ("<|user|>", "<|endoftext|>"))


RECIPES: dict[str, Callable[[Path, int], None]] = {
    "tiny-internvl": _internvl,
    "tiny-llava-onevision": _llava_onevision,
    "tiny-glm-4.1v": _glm4v,
}
