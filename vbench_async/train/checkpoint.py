"""Checkpoints (resume) and export (a Hugging Face model directory that `vbench-async run --model DIR` evaluates).

A checkpoint is a directory `OUTPUT/checkpoints/step-NNNNNN/` holding
    shard-RRRRR-model-00001-of-00001.safetensors   one file per rank: that rank's shards of the weights and of the
                                                   optimizer state ("model/<name>", "optim/<name>/<key>"), written by
                                                   torch.distributed.checkpoint in safetensors (the offsets of every
                                                   shard are JSON in the file header)
    optimizer.json                                 optimizer param groups
    trainer_state.json                             step, prompts consumed, config hash, world size
No pickle anywhere, and no gather on rank 0: each rank writes its own shard, and on resume each rank reads only the
slices of the files that make up its shard (so the number of ranks may even change). The files go into a temporary
directory that rank 0 renames into place, so a crash never leaves a half-written checkpoint behind; `keep` newest
checkpoints are kept. `consolidate` reassembles the full weights offline (an export on demand).
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
FORMAT = "dcp-safetensors-1"
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


def _sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], list[dict]]:
    """One flat dict of this rank's shards (DTensors) of weights and optimizer state, plus the param groups."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    flat: dict[str, Any] = {_MODEL + k: v for k, v in get_model_state_dict(model).items()}
    osd = get_optimizer_state_dict(model, optimizer)  # initialises empty state (a zero step at lr 0) if needed
    for name, entry in osd["state"].items():
        for key, value in entry.items():
            if not isinstance(value, torch.Tensor):
                value = torch.tensor(value)
            flat[f"{_OPTIM}{name}/{key}"] = value
    return flat, osd["param_groups"]


def save_checkpoint(output_dir: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any],
                    info: DistInfo, keep: int) -> Path:
    """Every rank writes its shard (a collective); rank 0 adds the JSON files and renames the directory."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    final = Path(output_dir) / "checkpoints" / f"step-{state['step']:06d}"
    tmp = final.parent / f".tmp-{final.name}"
    if info.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier(info)
    flat, groups = _sharded_state(model, optimizer)
    dcp.save(flat, storage_writer=HuggingFaceStorageWriter(str(tmp), save_distributed=True))
    barrier(info)
    if info.main:
        (tmp / "optimizer.json").write_text(json.dumps({"param_groups": groups}, indent=1))
        (tmp / STATE_FILE).write_text(json.dumps({**state, "format": FORMAT}, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("saved checkpoint %s", final)
    barrier(info)
    return final


def _read_state(path: Path) -> dict[str, Any]:
    if not (path / STATE_FILE).is_file():
        raise UserError(f"{path} is not a training checkpoint (no {STATE_FILE})")
    state = json.loads((path / STATE_FILE).read_text())
    if state.get("format") != FORMAT:
        raise UserError(f"{path} is a checkpoint of an older format ({state.get('format', 'full safetensors')}); "
                        "resume from a newer one or start with checkpoint.resume: none")
    return state


def load_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore this rank's shards of weights and optimizer state (reading only their slices); the trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    path = Path(path)
    state = _read_state(path)
    flat, _ = _sharded_state(model, optimizer)
    dcp.load(flat, storage_reader=HuggingFaceStorageReader(str(path)))
    set_model_state_dict(model, {k[len(_MODEL):]: v for k, v in flat.items() if k.startswith(_MODEL)})
    opt_state: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(_OPTIM):
            name, _, sub = key[len(_OPTIM):].rpartition("/")
            opt_state.setdefault(name, {})[sub] = value
    groups = json.loads((path / "optimizer.json").read_text())["param_groups"]
    groups = [dict(g, betas=tuple(g["betas"])) if "betas" in g else g for g in groups]
    set_optimizer_state_dict(model, optimizer, {"state": opt_state, "param_groups": groups})
    return state


def consolidate(path: Path, prefix: str = _MODEL) -> dict[str, torch.Tensor]:
    """The full weights of a checkpoint, reassembled from every rank's shard file (one process, no collectives).
    `prefix` "optim/" gives the optimizer state instead, "" both (names keep their prefix unless it is "model/")."""
    from safetensors import safe_open

    path = Path(path)
    _read_state(path)
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


def export_checkpoint(checkpoint: Path, out_dir: Path) -> Path:
    """A checkpoint's weights as a Hugging Face directory, in this one process (no launcher, no collectives)."""
    from .. import models

    checkpoint = Path(checkpoint)
    weights = consolidate(checkpoint)
    state = json.loads((checkpoint / STATE_FILE).read_text())
    base = models.resolve(state["model"]).path
    return export_hf(weights, base, out_dir, {"step": state["step"], "config_hash": state.get("config_hash"),
                                              "base_model": state["model"], "checkpoint": str(checkpoint)})
