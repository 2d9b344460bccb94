"""What a launcher told this process: which shard it is (`--shard auto`) and which GPUs its engine may use.

Read from the environment, first match wins:
    VBENCH_ASYNC_SHARD=K/N                          set by hand or by any script
    RANK, WORLD_SIZE                                torchrun (and most launchers built on torch.distributed)
    SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT     a Slurm job array (MIN and STEP taken into account)
    SLURM_PROCID, SLURM_NTASKS                      several tasks of one `srun`
GPUs: under torchrun (LOCAL_RANK) or srun (SLURM_LOCALID) with several processes per node, process L takes the L-th
block of tensor-parallel x data-parallel devices of what CUDA_VISIBLE_DEVICES shows, unless the scheduler already
gave it exactly one block.
"""

from __future__ import annotations

import logging
import os
from typing import Mapping

from ..errors import UserError
from ..sharding import Shard

log = logging.getLogger(__name__)

SHARD_ENV = "VBENCH_ASYNC_SHARD"
DEVICE_ENV = "CUDA_VISIBLE_DEVICES"


def shard_from_env(env: Mapping[str, str]) -> tuple[Shard, str] | None:
    """(shard, where it came from), or None when no launcher says this process is one of several."""
    if env.get(SHARD_ENV):
        return Shard.parse(env[SHARD_ENV]), SHARD_ENV
    if "RANK" in env and "WORLD_SIZE" in env:
        return Shard(_int(env, "RANK"), _int(env, "WORLD_SIZE")).checked(), "RANK/WORLD_SIZE"
    if "SLURM_ARRAY_TASK_ID" in env and "SLURM_ARRAY_TASK_COUNT" in env:
        task, count = _int(env, "SLURM_ARRAY_TASK_ID"), _int(env, "SLURM_ARRAY_TASK_COUNT")
        first, step = _int(env, "SLURM_ARRAY_TASK_MIN", 0), _int(env, "SLURM_ARRAY_TASK_STEP", 1) or 1
        index, rest = divmod(task - first, step)
        if rest or not 0 <= index < count:
            raise UserError(f"Slurm array task {task} (min {first}, step {step}, count {count}) is not an evenly "
                            "spaced array; pass --shard K/N explicitly")
        return Shard(index, count), "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"
    if "SLURM_PROCID" in env and _int(env, "SLURM_NTASKS", 1) > 1:
        return Shard(_int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")).checked(), "SLURM_PROCID/SLURM_NTASKS"
    return None


def resolve_shard(value: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """The --shard option: None (everything), "K/N", or "auto" (from the launcher; everything if there is none).
    A split into 1 shard is no split."""
    if not value:
        return None
    env = os.environ if env is None else env
    if value.strip().lower() == "auto":
        found = shard_from_env(env)
        if found is None:
            log.info("--shard auto: no launcher variables (%s, RANK/WORLD_SIZE, SLURM_ARRAY_*, SLURM_PROCID/"
                     "SLURM_NTASKS) are set; evaluating everything", SHARD_ENV)
            return None
        shard, source = found
        log.info("--shard auto: shard %s from %s", shard, source)
    else:
        shard = Shard.parse(value)
    return shard if shard.count > 1 else None


def gang_launcher(env: Mapping[str, str] | None = None) -> str | None:
    """The launcher that stops every process of the job when one exits non-zero, if this process runs under one:
    torchrun (elastic agent: TORCHELASTIC_RUN_ID, or RANK/WORLD_SIZE with LOCAL_RANK), or a multi-task srun (its
    --kill-on-bad-exit, often the cluster default). A Slurm array task or a hand-started shard stops nobody."""
    env = os.environ if env is None else env
    if env.get(SHARD_ENV):
        return None  # the shard was given by hand: a plain exit code harms no sibling
    if env.get("TORCHELASTIC_RUN_ID") or ("RANK" in env and "WORLD_SIZE" in env and "LOCAL_RANK" in env):
        return "torchrun"
    if "SLURM_PROCID" in env and "SLURM_ARRAY_TASK_ID" not in env and _int(env, "SLURM_NTASKS", 1) > 1:
        return "srun"
    return None


def select_devices(value: str | None, per_process: int, env: Mapping[str, str] | None = None) -> list[str] | None:
    """Devices this process's engine should see: the --gpus option ("0,1", or "auto"), as CUDA_VISIBLE_DEVICES
    entries; None leaves the environment alone."""
    env = os.environ if env is None else env
    if not value or per_process < 1:
        return None
    visible = [d.strip() for d in env.get(DEVICE_ENV, "").split(",") if d.strip()]
    if value.strip().lower() != "auto":
        wanted = [d.strip() for d in value.split(",") if d.strip()]
        if len(wanted) != per_process:
            raise UserError(f"--gpus lists {len(wanted)} device(s) but the engine needs tensor-parallel x "
                            f"data-parallel = {per_process}")
        if not visible:
            return wanted
        bad = [d for d in wanted if not (d.isdigit() and int(d) < len(visible))]
        if bad:  # indices into what the scheduler already exposes, as CUDA itself would read them
            raise UserError(f"--gpus {value}: {DEVICE_ENV}={env[DEVICE_ENV]} shows {len(visible)} device(s); give "
                            f"indices 0..{len(visible) - 1}")
        return [visible[int(d)] for d in wanted]
    local = _local_rank(env)
    if local is None or (visible and len(visible) == per_process):
        return None  # one process per node, or the scheduler already chose this process's devices
    block = visible or [str(i) for i in range((local + 1) * per_process)]
    chosen = block[local * per_process:(local + 1) * per_process]
    if len(chosen) < per_process:
        raise UserError(f"local process {local} needs devices {local * per_process}..{(local + 1) * per_process - 1}"
                        f" but {DEVICE_ENV}={env.get(DEVICE_ENV)} shows {len(visible)}; start fewer processes per "
                        "node or lower --tensor-parallel-size / --data-parallel-size")
    return chosen


def apply_devices(devices: list[str] | None) -> None:
    """Restrict this process (and the engine processes it starts) to `devices`. Must run before CUDA is touched."""
    if devices is not None:
        os.environ[DEVICE_ENV] = ",".join(devices)
        log.info("engine devices: %s=%s", DEVICE_ENV, os.environ[DEVICE_ENV])


def _local_rank(env: Mapping[str, str]) -> int | None:
    """This process's index on its node when a launcher started several there."""
    for rank, size in (("LOCAL_RANK", "LOCAL_WORLD_SIZE"), ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")):
        if rank in env:
            per_node = env.get(size, "").split("(")[0]  # Slurm may write "4(x2)": 4 tasks on each of 2 nodes
            if not per_node.isdigit() or int(per_node) > 1:
                return _int(env, rank)
    return None


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise UserError(f"${name} is not set")
        return default
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"${name}={raw!r} is not an integer") from None
