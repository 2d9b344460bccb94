"""`vbench-async train`: a thin wrapper that execs `torchrun ... -m vbench_async.train --config CONFIG`.

Every TrainConfig setting is a flag (`--rollout.n 4`, train/flags.py); flags and `--set` reach torchrun as `--set`."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ..errors import UserError
from ..train.flags import USAGE, add_config_flags, add_set_option
from .formatting import DefaultsHelpFormatter


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train",
        help="RL-train a model (GRPO, Dr. GRPO, DAPO, GSPO, RLOO) with torchrun + FSDP2",
        description=(
            "Train MODEL with a GRPO-family algorithm on the evaluation's data path: records through the benchmark "
            "adapters, frames from the frame cache, rewards from the scorers. This command checks the config and "
            "replaces itself with `torchrun ... -m vbench_async.train --config CONFIG`; see docs/training.md."
        ),
        formatter_class=DefaultsHelpFormatter,
        usage=USAGE,
    )
    p.add_argument("--config", required=True, type=Path, help="training config YAML (examples in examples/train/)")
    add_set_option(p)
    dist = p.add_argument_group("processes (passed to torchrun)")
    dist.add_argument("--nproc-per-node", default="1",
                      help="processes on this machine: a number, 'gpu' (one per GPU) or 'cpu'")
    dist.add_argument("--nnodes", default="1", help="machines taking part (or MIN:MAX for elastic runs)")
    dist.add_argument("--node-rank", type=int, default=0, help="this machine's rank (static rendezvous)")
    dist.add_argument("--master-addr", help="address of node 0 (multi-node, static rendezvous)")
    dist.add_argument("--master-port", type=int, default=29500, help="port on node 0 (multi-node)")
    dist.add_argument("--rdzv-endpoint", help="HOST:PORT of a c10d rendezvous (multi-node, instead of --master-addr)")
    dist.add_argument("--rdzv-id", default="vbench-train", help="rendezvous id shared by all nodes of a job")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun command instead of running it")
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The config's flags (they read TrainConfig's declaration: built only when `train` is the command)."""
    add_config_flags(p)


def torchrun_command(args: argparse.Namespace) -> list[str]:
    """The argv that launches training (every node of a multi-node job runs it with its own --node-rank)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.nproc_per_node)]
    if args.rdzv_endpoint:
        cmd += ["--nnodes", str(args.nnodes), "--rdzv_backend", "c10d", "--rdzv_endpoint", args.rdzv_endpoint,
                "--rdzv_id", args.rdzv_id]
    elif args.master_addr:
        cmd += ["--nnodes", str(args.nnodes), "--node_rank", str(args.node_rank), "--master_addr", args.master_addr,
                "--master_port", str(args.master_port)]
    elif str(args.nnodes) != "1":
        raise UserError("several nodes need --master-addr (static) or --rdzv-endpoint (c10d rendezvous)")
    else:
        cmd += ["--standalone"]  # one machine: a free port, no address to configure
    cmd += ["-m", "vbench_async.train", "--config", str(args.config)]
    for item in args.overrides:
        cmd += ["--set", item]
    return cmd


def main(args: argparse.Namespace) -> int:
    from ..train.config import load_config

    if not args.config.is_file():
        raise UserError(f"no such config file: {args.config}")
    load_config(args.config, args.overrides)  # fail here, once, rather than in every process
    cmd = torchrun_command(args)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    # No sigterm_as_ctrl_c() here: this process becomes torchrun, which handles SIGTERM itself (it stops its workers).
    os.execv(cmd[0], cmd)
    return 0  # not reached
