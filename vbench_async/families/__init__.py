"""The model-family registry: one module per family (frame rules, engine hand-off, chat quirks, prompt-token rule,
reference). Adding a family is one module here, its entry in MODULES, and a tiny-model recipe."""

from __future__ import annotations

import importlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from .base import Family, FrameRules, Handoff, Reference, VideoShape, VisualTokens

MODULES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "internvl", "llava_onevision", "glm4v")


@lru_cache(maxsize=1)
def registry() -> dict[str, Family]:
    """Family name -> Family, in MODULES order."""
    out: dict[str, Family] = {}
    for module in MODULES:
        family = importlib.import_module(f"{__name__}.{module}").FAMILY
        out[family.name] = family
    return out


@lru_cache(maxsize=1)
def _lookup() -> dict[str, str]:
    names = {}
    for family in registry().values():
        for key in (family.name, *family.aliases):
            names[key.lower()] = family.name
    return names


def names() -> list[str]:
    return list(registry())


def canonical(name: str) -> str | None:
    """The registered family name for `name` or one of its aliases (case-insensitive); None when unknown."""
    return _lookup().get(str(name).lower())


def get(name: str) -> Family:
    """The family called `name` (or an alias); ValueError when unknown."""
    found = canonical(name)
    if found is None:
        raise ValueError(f"unknown model family {name!r}; expected one of {names()}")
    return registry()[found]


def for_model_type(model_type: str) -> Family | None:
    for family in registry().values():
        if model_type in family.model_types:
            return family
    return None


def supported_model_types() -> list[str]:
    return sorted(t for f in registry().values() for t in f.model_types)


def model_config(model: str) -> dict[str, Any]:
    """config.json of a local model directory, or of a hub id through transformers (cached or online)."""
    local = Path(model) / "config.json"
    if local.is_file():
        try:
            return json.loads(local.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read {local}: {exc}") from exc
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(model)).to_dict()
    except OSError as exc:
        if hub_offline():
            raise UserError(offline_message(model)) from exc
        raise UserError(f"cannot load the config of {model!r}: {exc}") from exc


def hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off for this process (HF_HUB_OFFLINE=1, which `make` sets)."""
    from huggingface_hub import constants

    is_offline = getattr(constants, "is_offline_mode", None)
    return bool(is_offline() if callable(is_offline) else constants.HF_HUB_OFFLINE)


def offline_message(model: str) -> str:
    """Why a hub id cannot load while the hub is off, and the two ways out."""
    return (f"cannot load the config of {model!r}: it is not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 "
            "keeps the hub off (the Makefile sets it): download it with the hub on (`HF_HUB_OFFLINE=0 vbench-async "
            f"...`, or `unset HF_HUB_OFFLINE`; `huggingface-cli download {model}`), or pass a local model directory "
            "(--model /path/to/model)")


def for_config(config: Mapping[str, Any], what: str) -> Family:
    """The family of a checkpoint's config.json; UserError naming `what` when no family claims its model_type."""
    model_type = str(config.get("model_type", ""))
    family = for_model_type(model_type)
    if family is None:
        raise UserError(f"model type {model_type!r} of {what!r} is not supported; supported: "
                        f"{', '.join(supported_model_types())}")
    return family


def frame_settings(family: Family, config: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The FrameSpec fields the checkpoint's config decides for its family (e.g. the fixed frame side)."""
    try:
        return family.frame_settings(config)
    except ValueError as exc:
        raise UserError(f"{what}: {exc}") from exc


@lru_cache(maxsize=64)
def handoff_for(model: str) -> Handoff:
    """How the backends hand pre-sampled frames to the engine for this checkpoint (its family's declaration)."""
    return for_config(model_config(model), model).handoff


__all__ = ["handoff_for", "Family", "FrameRules", "Handoff", "Reference", "VideoShape", "VisualTokens", "registry",
           "names", "get", "canonical", "for_model_type", "for_config", "frame_settings", "model_config",
           "supported_model_types"]
