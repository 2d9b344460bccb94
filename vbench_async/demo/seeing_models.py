"""Seeing models: tiny checkpoints whose weights were trained (on this CPU, from the synthetic generator) to answer
questions about the demo's videos from their pixels, so every path that carries frames can be tested on signal.

A seeing model is its tiny model (same config, processor and tokenizer, built locally) with trained weights shipped
in this package (`weights/<name>.safetensors`, bf16, about 1.4 MB each). `vbench_async/train/seeing.py` trained them,
`scripts/train_seeing_model.py` is the command that did, and docs/seeing-models.md gives the recipe and the figures.
They trained on videos of other seeds than the demo's and the tests', so what they score on the demo measures seeing,
not memory: with the frames blanked (`run --ablation blank`) they fall to chance.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import UserError
from ._atomic import build_once, default_home

WEIGHTS = Path(__file__).resolve().parent / "weights"
# seeing model -> the tiny model whose architecture, processor and tokenizer it shares
BASES = {"seeing-qwen2.5-vl": "tiny-qwen2.5-vl", "seeing-qwen3-vl": "tiny-qwen3-vl"}
SEEING_MODELS = tuple(BASES)
SEEING_MODEL_VERSION = 1  # bump when a weights file changes


def weights_path(name: str) -> Path:
    return WEIGHTS / f"{name}.safetensors"


def model_dir(name: str, home: Path | None = None) -> Path:
    return (home or default_home()) / "models" / f"{name}-v{SEEING_MODEL_VERSION}"


def ensure_seeing_model(name: str, home: Path | None = None) -> Path:
    """The directory of seeing model `name`: its tiny model's files with the shipped trained weights (built once)."""
    from .tiny_models import REQUIRED_FILES, ensure_tiny_model

    if name not in BASES:
        raise UserError(f"unknown seeing model {name!r}; available: {', '.join(SEEING_MODELS)}")
    weights = weights_path(name)
    if not weights.is_file():
        raise UserError(f"the weights of {name} are missing ({weights}); train them with "
                        f"`python scripts/train_seeing_model.py {name}`")
    base = ensure_tiny_model(BASES[name], home)

    def build(out: Path) -> None:
        for f in base.iterdir():
            if f.is_file() and f.suffix != ".safetensors" and f.name != "vbench_tiny_model.json":
                shutil.copy2(f, out / f.name)
        shutil.copyfile(weights, out / "model.safetensors")
        (out / "vbench_tiny_model.json").write_text(json.dumps(
            {"name": name, "version": SEEING_MODEL_VERSION, "base": BASES[name], "trained": True}, indent=1) + "\n")

    return build_once(model_dir(name, home), build, REQUIRED_FILES)
