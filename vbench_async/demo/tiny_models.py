"""Tiny random-weight checkpoints of every registered family, built locally and deterministically on first use.

`--model tiny-qwen2.5-vl` runs the whole evaluation path (processor, vLLM engine, scoring) in seconds on a CPU. The
weights are random, so answers are noise; what matters is that every stage sees a real checkpoint of the family.
Sizes follow what vLLM's CPU backend accepts (attention head_dim 64). Build recipe: docs/environment-*-cpu.md. The
Qwen recipes are here; the other families' are in tiny_families.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ._atomic import build_once, default_home
from .tiny_families import RECIPES

QWEN_TINY_MODELS = ("tiny-qwen2-vl", "tiny-qwen2.5-vl", "tiny-qwen3-vl")
TINY_MODELS = QWEN_TINY_MODELS + tuple(RECIPES)
# Seeing models: a tiny model's architecture, tokenizer and processor with weights trained to answer the seeing suite
# from the pixels (scripts/train_seeing_model.py wrote them; tests/test_seeing_model.py retrains and checks them).
SEEING_MODELS = {"seeing-qwen2.5-vl": "tiny-qwen2.5-vl", "seeing-qwen3-vl": "tiny-qwen3-vl"}
SEEING_WEIGHTS = Path(__file__).resolve().parent / "weights"
BUILT_MODELS = TINY_MODELS + tuple(SEEING_MODELS)
TINY_MODEL_VERSION = 2  # bump when anything below changes what gets written (2: weights stored in bf16)
SEED = 1234


@dataclass(frozen=True)
class _Family:
    model_class: str  # transformers class names, resolved at build time (keeps this module import-light)
    config_class: str
    processor_class: str
    video_processor_class: str
    patch_size: int
    text: dict[str, Any]
    vision: dict[str, Any]
    default_system: str | None
    bare_video_pad: bool
    video_size: dict[str, int]  # pixel budgets; Qwen3-VL's longest_edge is per video (t*h*w), the others per frame
    video_extra: dict[str, Any] = field(default_factory=dict)


# Text side: 2 layers, hidden 128, 2 query heads of 64 (vLLM CPU attention), 1 KV head; mrope halves sum to 32.
_TEXT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=32768)
_QWEN2_VIDEO_SIZE = {"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 64}  # per frame

_FAMILIES: dict[str, _Family] = {
    "tiny-qwen2-vl": _Family(
        model_class="Qwen2VLForConditionalGeneration", config_class="Qwen2VLConfig",
        processor_class="Qwen2VLProcessor", video_processor_class="Qwen2VLVideoProcessor", patch_size=14,
        text=dict(_TEXT, rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [8, 12, 12]}),
        vision=dict(depth=2, embed_dim=64, hidden_size=128, mlp_ratio=2, num_heads=2, patch_size=14),
        default_system="You are a helpful assistant.", bare_video_pad=False,
        # max_video_tokens bounds the whole video (90% of it), so prompts stay inside a 2048-token context.
        video_size=_QWEN2_VIDEO_SIZE, video_extra={"max_video_tokens": 1024},
    ),
    "tiny-qwen2.5-vl": _Family(
        model_class="Qwen2_5_VLForConditionalGeneration", config_class="Qwen2_5_VLConfig",
        processor_class="Qwen2_5_VLProcessor", video_processor_class="Qwen2VLVideoProcessor", patch_size=14,
        text=dict(_TEXT, rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [8, 12, 12]}),
        vision=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                    patch_size=14, window_size=112, fullatt_block_indexes=[1]),
        default_system="You are a helpful assistant.", bare_video_pad=False,
        video_size=_QWEN2_VIDEO_SIZE, video_extra={"max_video_tokens": 1024},
    ),
    "tiny-qwen3-vl": _Family(
        model_class="Qwen3VLForConditionalGeneration", config_class="Qwen3VLConfig",
        processor_class="Qwen3VLProcessor", video_processor_class="Qwen3VLVideoProcessor", patch_size=16,
        text=dict(_TEXT, head_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                                       "mrope_section": [12, 10, 10], "mrope_interleaved": True}),
        vision=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                    patch_size=16, num_position_embeddings=256, deepstack_visual_indexes=[1]),
        default_system=None, bare_video_pad=True,
        # Whole-video budget: t*h*w <= 32*32*1792 pixels, i.e. at most ~900 video tokens; per frame <= 64 tokens.
        video_size={"shortest_edge": 32 * 32 * 8, "longest_edge": 32 * 32 * 1792},
        video_extra={"max_video_tokens": 64},
    ),
}


def models_home(home: Path | None = None) -> Path:
    """The folder every tiny model is built in (a server's jobs may name what is inside: serve/paths.py)."""
    return (home or default_home()) / "models"


def model_dir(name: str, home: Path | None = None) -> Path:
    """Where `name` is (or will be) built."""
    return models_home(home) / f"{name}-v{TINY_MODEL_VERSION}"


def ensure_tiny_model(name: str, home: Path | None = None) -> Path:
    """Return the directory of tiny (or seeing) model `name`, building it first if needed (atomic, safe under races)."""
    if name in SEEING_MODELS:
        # Named after the weights' hash: new weights in the package build a new folder instead of reusing the old one
        target = models_home(home) / f"{name}-{_weights_digest(name)[:12]}"
        return build_once(target, lambda tmp: _build_seeing(name, tmp, home), REQUIRED_FILES)
    if name not in TINY_MODELS:
        raise UserError(f"unknown tiny model {name!r}; available: {', '.join(BUILT_MODELS)}")
    return build_once(model_dir(name, home), lambda tmp: _build(name, tmp), REQUIRED_FILES)


def seeing_weights(name: str) -> Path:
    return SEEING_WEIGHTS / f"{name}.safetensors"


def _weights_digest(name: str) -> str:
    import hashlib

    weights = seeing_weights(name)
    if not weights.is_file():
        raise UserError(f"{name}: no trained weights at {weights}; scripts/train_seeing_model.py writes them")
    return hashlib.sha256(weights.read_bytes()).hexdigest()


def _build_seeing(name: str, out: Path, home: Path | None) -> None:
    """The base tiny model's files with the trained weights in place of its random ones."""
    import shutil

    weights = seeing_weights(name)
    digest = _weights_digest(name)
    base = ensure_tiny_model(SEEING_MODELS[name], home)
    for path in base.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name != "vbench_tiny_model.json":
            shutil.copyfile(path, out / path.name)
    shutil.copyfile(weights, out / "model.safetensors")
    (out / "vbench_tiny_model.json").write_text(json.dumps(
        {"name": name, "base": SEEING_MODELS[name], "version": TINY_MODEL_VERSION, "weights_sha256": digest},
        indent=1) + "\n")


# What every finished tiny model holds (build_once refuses to publish a directory without them).
REQUIRED_FILES = ("config.json", "*.safetensors", "processor_config.json", "tokenizer*", "vbench_tiny_model.json")


def resolve_model(name_or_path: str) -> Path | str:
    """Map a `--model` value to what the backends load.

    tiny-* and seeing-* names give a built model; an existing directory is returned as a Path; a hub id such as
    `Qwen/Qwen2.5-VL-7B-Instruct` is returned unchanged. Unknown tiny names and missing local paths raise UserError.
    """
    if name_or_path in BUILT_MODELS:
        return ensure_tiny_model(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if name_or_path.startswith(("tiny-", "seeing-")):
        raise UserError(f"unknown tiny model {name_or_path!r}; available: {', '.join(BUILT_MODELS)}")
    if path.exists():
        raise UserError(f"model {name_or_path!r} is a file; give a model directory or a hub id (org/name)")
    if _looks_like_path(name_or_path):
        raise UserError(f"model directory {str(path)!r} does not exist")
    return name_or_path


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def local_model_path(name_or_path: str) -> Path | None:
    """The local file or folder a `--model` value names, as `resolve_model` reads it (a path-like value that does not
    exist included); None for a tiny-* name or a hub id, which name no folder of the caller's (serve/paths.py)."""
    if name_or_path in BUILT_MODELS:
        return None
    try:
        path = Path(name_or_path).expanduser()
    except RuntimeError:  # `~user/...` of no such user: still a path
        return Path(name_or_path)
    return path if os.path.lexists(path) or _looks_like_path(name_or_path) else None


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or "\\" in text or not _HUB_ID.match(text)


def _in_process_group() -> bool:
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def _build(name: str, out: Path) -> None:
    if _in_process_group():
        # Inside a process group transformers writes weights and configs on global rank 0 only, so whichever rank
        # holds the build lock would produce an empty directory: build in a child process that has no group.
        root = str(Path(__file__).resolve().parents[2])  # this very package, whatever the working directory
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        subprocess.run([sys.executable, "-m", "vbench_async.demo.tiny_models", name, str(out)], check=True, env=env)
        return
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" bars are noise in a CLI run
    try:
        if name in RECIPES:
            RECIPES[name](out, SEED)
        else:
            _write_checkpoint(name, out)
        (out / "vbench_tiny_model.json").write_text(
            json.dumps({"name": name, "version": TINY_MODEL_VERSION, "seed": SEED}, indent=1) + "\n")
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _write_checkpoint(name: str, out: Path) -> None:
    import torch
    import transformers

    from .tiny_tokenizer import build_tokenizer, chat_template

    fam = _FAMILIES[name]
    tok = build_tokenizer(seed=0)
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>", "<|image_pad|>",
                                                      "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")}
    text = dict(fam.text, vocab_size=len(tok), bos_token_id=None, eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"])
    config = getattr(transformers, fam.config_class)(
        text_config=text, vision_config=fam.vision,
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(SEED)
    # Initialised in float32 (the seeded RNG stream), stored in bfloat16: the dtype vLLM serves, half the bytes.
    model = getattr(transformers, fam.model_class)(config).eval().to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|endoftext|>"], do_sample=False
    )
    model.save_pretrained(out)

    factor = fam.patch_size * 2  # patch * spatial merge
    image_processor = transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": factor * factor * 4, "longest_edge": factor * factor * 256},
        patch_size=fam.patch_size, merge_size=2, temporal_patch_size=2,
    )
    video_processor = getattr(transformers, fam.video_processor_class)(
        size=fam.video_size, patch_size=fam.patch_size, merge_size=2, temporal_patch_size=2,
        cap_pixels_per_frame=True, **fam.video_extra,
    )
    processor = getattr(transformers, fam.processor_class)(
        image_processor=image_processor, tokenizer=tok, video_processor=video_processor,
        chat_template=chat_template(fam.default_system, fam.bare_video_pad),
    )
    processor.save_pretrained(out)


if __name__ == "__main__":  # `_build` in a fresh process (see above): NAME OUT_DIR
    _build(sys.argv[1], Path(sys.argv[2]))
