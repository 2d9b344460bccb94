"""Checkpoints (resume) and export (a Hugging Face model directory that `vbench-async run --model DIR` evaluates).

A checkpoint is a directory `OUTPUT/checkpoints/step-NNNNNN/` holding
    model.safetensors       full (unsharded) float32 weights
    optimizer.safetensors   optimizer tensors, keyed "<param name>::<state key>"
    optimizer.json          param groups and non-tensor optimizer state
    trainer_state.json      step, prompts consumed (the data position), config hash, world size
No pickle anywhere. Full state dicts make a checkpoint independent of the number of ranks. Rank 0 writes into a
temporary directory that is renamed into place, so a crash never leaves a half-written checkpoint behind.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import UserError
from .fsdp import DistInfo, barrier

log = logging.getLogger(__name__)

STATE_FILE = "trainer_state.json"
_SEP = "::"


def _full_options(cpu_offload: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=cpu_offload)


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors that share memory (tied weights): give repeats their own copy."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        out[name] = t.clone() if key in seen else t
        seen.add(key)
    return out


def gather_for_rank0(model: nn.Module) -> dict[str, torch.Tensor]:
    """The full model state dict on rank 0 (empty elsewhere). A collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_full_options(cpu_offload=True))


def checkpoint_dirs(output_dir: Path) -> list[Path]:
    root = Path(output_dir) / "checkpoints"
    return sorted(p for p in root.glob("step-*") if (p / STATE_FILE).is_file()) if root.is_dir() else []


def save_checkpoint(output_dir: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any],
                    info: DistInfo, keep: int) -> Path:
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    model_sd = gather_for_rank0(model)
    optim_sd = get_optimizer_state_dict(model, optimizer, options=_full_options(cpu_offload=True))
    final = Path(output_dir) / "checkpoints" / f"step-{state['step']:06d}"
    if info.main:
        tmp = final.parent / f".tmp-{final.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file(_unshared(model_sd), str(tmp / "model.safetensors"))
        tensors, meta = _flatten_optimizer(optim_sd)
        save_file(_unshared(tensors), str(tmp / "optimizer.safetensors"))
        (tmp / "optimizer.json").write_text(json.dumps(meta, indent=1))
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("saved checkpoint %s", final)
    barrier(info)
    return final


def _flatten_optimizer(osd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for name, entry in osd.get("state", {}).items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{name}{_SEP}{key}"] = value
            else:
                scalars.setdefault(name, {})[key] = value
    return tensors, {"param_groups": osd.get("param_groups", []), "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, dict[str, Any]] = {}
    for flat, value in tensors.items():
        name, _, key = flat.rpartition(_SEP)
        state.setdefault(name, {})[key] = value
    for name, entry in meta.get("scalars", {}).items():
        state.setdefault(name, {}).update(entry)
    groups = [dict(g, betas=tuple(g["betas"])) if "betas" in g else g for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


def load_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore weights and optimizer state on every rank (each reads the files); return the trainer state."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    path = Path(path)
    if not (path / STATE_FILE).is_file():
        raise UserError(f"{path} is not a training checkpoint (no {STATE_FILE})")
    options = _full_options(cpu_offload=False)
    set_model_state_dict(model, load_file(str(path / "model.safetensors")), options=options)
    meta = json.loads((path / "optimizer.json").read_text())
    osd = _unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), meta)
    set_optimizer_state_dict(model, optimizer, osd, options=options)
    return json.loads((path / STATE_FILE).read_text())


def find_resume(output_dir: Path, resume: str) -> Path | None:
    """The checkpoint to resume from: `auto` (the newest in output_dir, if any), `none`, or a directory."""
    if resume == "none":
        return None
    if resume == "auto":
        found = checkpoint_dirs(output_dir)
        return found[-1] if found else None
    path = Path(resume).expanduser()
    if not (path / STATE_FILE).is_file():
        raise UserError(f"checkpoint.resume: {path} is not a training checkpoint (no {STATE_FILE})")
    return path


# ------------------------------------------------------------------------------------------------ export


def source_dtype(model_dir: str) -> torch.dtype:
    """The dtype a checkpoint was published in (config.json `dtype` / `torch_dtype`), float32 if unstated."""
    cfg = Path(model_dir) / "config.json"
    name = None
    if cfg.is_file():
        data = json.loads(cfg.read_text())
        name = data.get("dtype") or data.get("torch_dtype") or (data.get("text_config") or {}).get("dtype")
    return getattr(torch, name) if isinstance(name, str) and isinstance(getattr(torch, name, None), torch.dtype) \
        else torch.float32


def export_hf(full_sd: dict[str, torch.Tensor], source_dir: str, out_dir: Path, info: dict[str, Any]) -> Path:
    """Write a Hugging Face model directory: the source architecture and processor with the trained weights,
    stored in the source's dtype. Call on rank 0 with the full state dict."""
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" bars are noise in the training log
    out_dir = Path(out_dir)
    tmp = out_dir.parent / f".tmp-{out_dir.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForImageTextToText.from_pretrained(source_dir, dtype=source_dtype(source_dir))
    missing, unexpected = model.load_state_dict(full_sd, strict=False)
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {id(params[k]) for k in full_sd if k in params}
    missing = [k for k in missing if not (k in params and id(params[k]) in loaded)]  # tied weights are loaded
    if missing or unexpected:
        raise RuntimeError(f"export: state dict does not match the architecture (missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]})")
    model.save_pretrained(tmp)
    AutoProcessor.from_pretrained(source_dir).save_pretrained(tmp)
    (tmp / "vbench_train.json").write_text(json.dumps(info, indent=1) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir
