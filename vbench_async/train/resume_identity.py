"""Which settings make a training run what it is: a resume must match them (resume by global step); the rest, the
cadence, the layout and the runtime knobs people turn after an out-of-memory or a hang, may change and is logged."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Protocol

from ..errors import UserError
from .trainer_state import TrainerState


class TrainConfig(Protocol):  # config.TrainConfig, as this module reads it (config imports this module)
    def to_dict(self) -> dict[str, Any]: ...

    def hash(self) -> str: ...

    def legacy_hash(self) -> str: ...

# Settings outside a run's identity: a resume may change them.
NOT_TRAINED = ("logging", "checkpoint", "validation", "output_dir")  # cadence and where files go
LAYOUT = (  # the same update, laid out anew
    "train.steps", "train.attn_implementation", "train.packing",
    "train.balance_ranks",  # the same global batch, split between the ranks otherwise
    "fsdp.shard_size",  # the mesh (checkpoints reshard on load)
    "rollout.sync_bucket_mb", "rollout.tensor_parallel_size", "rollout.max_num_seqs", "rollout.max_num_batched_tokens")
# The knobs people turn after an out-of-memory or a hang: how a step runs (memory, speed, timeouts, where the frame
# cache lies), not what it computes or the order of the data (verl and EasyR1 resume by global step). Micro-batches,
# gradient checkpointing and log-prob chunks change the order of float sums, not the update: the weights may differ
# from an uninterrupted run's by rounding. A resume logs each change, old -> new.
RUNTIME_KNOBS = (
    "train.micro_batch_size", "train.max_tokens_per_micro_batch", "train.gradient_checkpointing",
    "train.logprob_chunk", "rollout.vllm_gpu_memory_utilization", "rollout.vllm_sleep_level", "fsdp.timeout_s",
    "fsdp.peer_timeout_s", "fsdp.offload_rollout", "data.cache_dir", "data.decode_workers")


def identity(config: Mapping[str, Any], runtime: bool = False) -> dict[str, Any]:
    """The part of a config dict (`TrainConfig.to_dict`) that makes a run what it is (`runtime`: with RUNTIME_KNOBS,
    the hash of older checkpoints)."""
    d = json.loads(json.dumps(config))
    for key in NOT_TRAINED:
        d.pop(key, None)
    for dotted in LAYOUT + (() if runtime else RUNTIME_KNOBS):
        section, name = dotted.split(".")
        d.get(section, {}).pop(name, None)
    return d


def digest(d: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


_UNSET = "<unset>"


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, Mapping) and key != "run":  # validation.run is one value (a RunConfig's JSON)
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def resume_changes(cfg: TrainConfig, state: TrainerState | Mapping[str, Any], where: str) -> list[str]:
    """Check that a checkpoint's trainer state (`config`, else `config_hash`) belongs to this run; the settings that
    changed since it was saved ("train.micro_batch_size: 8 -> 4"). A UserError names the differences when what is
    trained changed. A checkpoint saved before trainer_state.json held the config is matched by its hash alone."""
    record = TrainerState.of(state)
    saved = record.config
    if saved is None:
        if record.config_hash not in (cfg.hash(), cfg.legacy_hash()):
            raise UserError(f"cannot resume from {where}: it was trained with a different configuration (it predates "
                            "checkpoints that record their config, so only the same one resumes it, up to "
                            "train.steps, logging, checkpoint and validation); use a new output_dir or "
                            "checkpoint.resume: none")
        return []
    current = cfg.to_dict()
    old_id, new_id = _flat(identity(saved)), _flat(identity(current))
    trained = sorted(k for k in old_id.keys() | new_id.keys() if old_id.get(k, _UNSET) != new_id.get(k, _UNSET))
    if trained:
        shown = "; ".join(f"{k}: {old_id.get(k, _UNSET)!r} -> {new_id.get(k, _UNSET)!r}" for k in trained[:6])
        raise UserError(f"cannot resume from {where}: it was trained with a different configuration ({shown}). "
                        f"Only the runtime knobs ({', '.join(RUNTIME_KNOBS)}), the layout ({', '.join(LAYOUT)}), "
                        "logging, checkpoint and validation may change; use a new output_dir or "
                        "checkpoint.resume: none")
    old, new = _flat(saved), _flat(current)
    return [f"{k}: {old.get(k, _UNSET)!r} -> {new.get(k, _UNSET)!r}" for k in sorted(old.keys() | new.keys())
            if old.get(k, _UNSET) != new.get(k, _UNSET)]
