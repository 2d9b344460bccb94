"""Checkpoints (resume) and export (a Hugging Face model directory that `vbench-async run --model DIR` evaluates).

A checkpoint is a directory `OUTPUT/checkpoints/step-NNNNNN/` holding
    shard-RRRRR-model-00001-of-00001.safetensors   one file per rank: that rank's shards of the weights and of the
                                                   optimizer state ("model/<name>", "optim/<name>/<key>"), written by
                                                   torch.distributed.checkpoint in safetensors (the offsets of every
                                                   shard are JSON in the file header)
    optimizer.json                                 optimizer param groups
    trainer_state.json                             step, prompts consumed, config (and its hash), world size
No pickle anywhere, and no gather on rank 0: each rank writes its own shard, and on resume each rank reads only the
slices of the files that make up its shard (so the number of ranks may even change). AdamW creates a parameter's state
at its first gradient; before saving, every trainable parameter still without state gets exactly what that first step
would create (step 0, zero moments: `complete_adam_state`), so a checkpoint holds state for every parameter even when
one had no gradient yet (a tower no loss reached, an expert no token was routed to, a first step skipped for a
non-finite gradient norm), and nothing changes numerically. Loading checks the model's keys strictly and reads the
optimizer state of the parameters the checkpoint has it for (one saved before the state was completed lacks some);
the others start fresh, as they would have in the run that saved it. The files go into a temporary
directory that rank 0 renames into place, so a crash never leaves a half-written checkpoint behind; `keep` newest
checkpoints are kept. `consolidate` reassembles the full weights offline (an export on demand).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from ..errors import UserError
from .fsdp import DistInfo, barrier
from .trainer_state import (
    EXPORT_FILE,
    FORMAT,
    OPTIMIZER_FILE,
    STATE_FILE,
    ExportInfo,
    OptimizerGroups,
    TrainerState,
    read_state,
)

log = logging.getLogger(__name__)

_MODEL, _OPTIM = "model/", "optim/"



def export_dir(output_dir: Path, step: int) -> Path:
    """Where a run's export of `step` goes: named after the run (its output folder), so an evaluation of it shows
    up under that name on a leaderboard instead of as "export"."""
    return Path(output_dir) / f"{Path(output_dir).resolve().name}-step{step}"

def _full_options(cpu_offload: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=cpu_offload)


def gather_for_rank0(model: nn.Module) -> dict[str, torch.Tensor]:
    """The full model state dict on rank 0 (empty elsewhere). A collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_full_options(cpu_offload=True))


def checkpoint_dirs(output_dir: Path) -> list[Path]:
    root = Path(output_dir) / "checkpoints"
    return sorted(p for p in root.glob("step-*") if (p / STATE_FILE).is_file()) if root.is_dir() else []


def complete_adam_state(optimizer: torch.optim.Optimizer) -> int:
    """Give every trainable parameter that has no Adam(W) state yet the state the optimizer's first step would create
    for it (torch's `Adam._init_group`: `step` a 0-d tensor 0.0, on the CPU unless capturable or fused; `exp_avg`,
    `exp_avg_sq` and, with amsgrad, `max_exp_avg_sq` zeros like the parameter, so a DTensor shard stays one). Its
    first real update then computes exactly what it would have from no state, and a parameter without a gradient is
    skipped by the optimizer either way. Returns how many parameters were completed; other optimizers are left as
    they are (the tolerant load copes with what they lack)."""
    from torch.optim.optimizer import _get_scalar_dtype  # what Adam._init_group gives `step`

    if not isinstance(optimizer, torch.optim.Adam):  # AdamW is an Adam
        return 0
    added = 0
    for group in optimizer.param_groups:
        on_device = group.get("capturable") or group.get("fused")
        for p in group["params"]:
            if not p.requires_grad or optimizer.state.get(p):
                continue
            state = optimizer.state[p]
            state["step"] = (torch.zeros((), dtype=_get_scalar_dtype(is_fused=group.get("fused")), device=p.device)
                             if on_device else torch.tensor(0.0, dtype=_get_scalar_dtype(), device="cpu"))
            for key in ("exp_avg", "exp_avg_sq", *(("max_exp_avg_sq",) if group.get("amsgrad") else ())):
                state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
            added += 1
    return added


def _sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], list[dict]]:
    """One flat dict of this rank's shards (DTensors) of weights and optimizer state, plus the param groups. The
    optimizer state is completed first (`complete_adam_state`): torch's own initialisation in
    `get_optimizer_state_dict` acts only on an optimizer with no state at all and no gradients (and then takes a
    step at lr 0, which leaves `step` at 1, not 0), so a parameter without a gradient at step 1, or a first step
    skipped with its gradients kept, would be missing from the checkpoint."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    flat: dict[str, Any] = {_MODEL + k: v for k, v in get_model_state_dict(model).items()}
    complete_adam_state(optimizer)
    osd = get_optimizer_state_dict(model, optimizer)
    for name, entry in osd["state"].items():
        for key, value in entry.items():
            if not isinstance(value, torch.Tensor):
                value = torch.tensor(value)
            flat[f"{_OPTIM}{name}/{key}"] = value
    return flat, osd["param_groups"]


def save_checkpoint(output_dir: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                    state: TrainerState | Mapping[str, Any], info: DistInfo, keep: int) -> Path:
    """Every rank writes its shard (a collective); rank 0 adds the JSON files and renames the directory."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    state = replace(TrainerState.of(state), format=FORMAT)
    final = Path(output_dir) / "checkpoints" / f"step-{state.step:06d}"
    tmp = final.parent / f".tmp-{final.name}"
    if info.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier(info)
    flat, groups = _sharded_state(model, optimizer)
    dcp.save(flat, storage_writer=HuggingFaceStorageWriter(str(tmp), save_distributed=True))
    barrier(info)
    if info.main:
        (tmp / OPTIMIZER_FILE).write_text(json.dumps(OptimizerGroups(param_groups=groups).to_json(), indent=1))
        (tmp / STATE_FILE).write_text(json.dumps(state.to_json(), indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("saved checkpoint %s", final)
    barrier(info)
    return final


def load_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> TrainerState:
    """Restore this rank's shards of weights and optimizer state (reading only their slices); the trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    path = Path(path)
    state = read_state(path)
    flat, _ = _sharded_state(model, optimizer)  # the template: every key this model and optimizer hold
    stored = set(HuggingFaceStorageReader(str(path)).read_metadata().state_dict_metadata)
    wanted = {k for k in flat if k.startswith(_MODEL)}
    held = {k for k in stored if k.startswith(_MODEL)}
    if wanted != held:
        missing, unexpected = sorted(wanted - held), sorted(held - wanted)
        raise UserError(f"{path} does not hold this model's weights: {len(missing)} missing "
                        f"({', '.join(k[len(_MODEL):] for k in missing[:3])}), {len(unexpected)} unexpected "
                        f"({', '.join(k[len(_MODEL):] for k in unexpected[:3])}); is it a checkpoint of "
                        f"{state.model or 'this model'}?")
    by_param: dict[str, list[str]] = {}
    for key in flat:
        if key.startswith(_OPTIM):
            by_param.setdefault(key[len(_OPTIM):].rpartition("/")[0], []).append(key)
    # A checkpoint saved before the state was completed lacks the parameters that had none: they start fresh (no
    # state), as they were in the run that saved it. A parameter's state is read whole: part of it is another
    # optimizer's (or amsgrad's) layout, not an older checkpoint.
    absent = {name for name, keys in by_param.items() if not any(k in stored for k in keys)}
    partial = sorted(k for name, keys in by_param.items() if name not in absent for k in keys if k not in stored)
    if partial:
        raise UserError(f"{path}: the optimizer state of some parameters lacks {', '.join(partial[:3])}: it was "
                        "saved with another optimizer configuration")
    for name in absent:
        for key in by_param[name]:
            del flat[key]
    if absent:
        log.info("%s holds no optimizer state for %d of %d parameters (saved before the state was completed: no "
                 "gradient yet, or a skipped first step); they start fresh, as they would have (first: %s)",
                 path, len(absent), len(by_param), min(absent))
    dcp.load(flat, storage_reader=HuggingFaceStorageReader(str(path)))
    set_model_state_dict(model, {k[len(_MODEL):]: v for k, v in flat.items() if k.startswith(_MODEL)})
    opt_state: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(_OPTIM):
            name, _, sub = key[len(_OPTIM):].rpartition("/")
            opt_state.setdefault(name, {})[sub] = value
    groups = [dict(g, betas=tuple(g["betas"])) if "betas" in g else g for g in OptimizerGroups.read(path)]
    set_optimizer_state_dict(model, optimizer, {"state": opt_state, "param_groups": groups},
                             options=StateDictOptions(strict=not absent))
    return state


def consolidate(path: Path, prefix: str = _MODEL) -> dict[str, torch.Tensor]:
    """The full weights of a checkpoint, reassembled from every rank's shard file (one process, no collectives).
    `prefix` "optim/" gives the optimizer state instead, "" both (names keep their prefix unless it is "model/")."""
    from safetensors import safe_open

    path = Path(path)
    read_state(path)
    parts: list[tuple[str, torch.Tensor, list[int]]] = []
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            info = json.loads((f.metadata() or {}).get("DCP_SHARDING_INFO", "{}"))
            for key in f.keys():
                if key.startswith(prefix):
                    part = f.get_tensor(key)
                    parts.append((key, part, info.get(key, {}).get("saved_offsets", [0] * part.dim())))
    shapes: dict[str, list[int]] = {}
    for key, part, offsets in parts:
        end = [o + n for o, n in zip(offsets, part.shape)]
        shapes[key] = [max(a, b) for a, b in zip(shapes.get(key, end), end)]
    full: dict[str, torch.Tensor] = {}
    for key, part, offsets in parts:
        if key not in full:
            full[key] = torch.empty(shapes[key], dtype=part.dtype)
        full[key][tuple(slice(o, o + n) for o, n in zip(offsets, part.shape))] = part
    if not full:
        raise UserError(f"{path} holds no model weights")
    return {k[len(_MODEL):]: v for k, v in full.items()} if prefix == _MODEL else full


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


def export_hf(full_sd: dict[str, torch.Tensor], source_dir: str, out_dir: Path, info: ExportInfo) -> Path:
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
    (tmp / EXPORT_FILE).write_text(json.dumps(info.to_json(), indent=1) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def export_checkpoint(checkpoint: Path, out_dir: Path) -> Path:
    """A checkpoint's weights as a Hugging Face directory, in this one process (no launcher, no collectives)."""
    from .. import models

    checkpoint = Path(checkpoint)
    weights = consolidate(checkpoint)
    state = read_state(checkpoint)
    if state.model is None:
        raise UserError(f"{checkpoint}/{STATE_FILE} does not name the base model to export it as")
    base = models.resolve(state.model).path
    return export_hf(weights, base, out_dir, ExportInfo(step=state.step, config_hash=state.config_hash,
                                                        base_model=state.model, checkpoint=str(checkpoint)))
