"""`python -m vbench_async.train` / `torchrun ... -m vbench_async.train`: parse the config, train."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .flags import USAGE, add_config_flags, add_set_option


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vbench_async.train",
        description="GRPO-family RL on FSDP2. Launch with torchrun for several processes; without it, one process.",
        usage=USAGE,
    )
    p.add_argument("--config", help="training config YAML (see examples/train/)")
    add_set_option(p)
    p.add_argument("--export", type=Path, metavar="CHECKPOINT",
                   help="instead of training: write a Hugging Face model directory from a (sharded) checkpoint")
    p.add_argument("--to", type=Path, metavar="DIR", help="with --export: the directory to write")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_config_flags(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else (logging.INFO if rank == 0 else logging.WARNING),
        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
    )
    from ..redact import scrub_handlers

    scrub_handlers(*logging.getLogger().handlers)  # no secret in a log line, whoever logs it
    from ..errors import UserError
    from .config import load_config

    try:
        if args.export:
            if not args.to:
                raise UserError("--export needs --to DIR")
            from .checkpoint import export_checkpoint

            print(f"exported {export_checkpoint(args.export, args.to)}")
            return 0
        if not args.config:
            raise UserError("--config is required (or --export CHECKPOINT --to DIR)")
        cfg = load_config(args.config, args.overrides)
        from .trainer import train

        metrics, exported = train(cfg)
    except UserError as exc:
        print(f"vbench-async train: error: {exc}", file=sys.stderr)
        return 2
    if rank == 0 and metrics:
        print(closing_table(metrics, Path(cfg.output_dir), exported))
    return 0


def closing_table(metrics: dict[str, float], output_dir: Path, exported: Path | None) -> str:
    """What `train` ends with: the last step's rewards, loss and validation scores as a table, then where things
    are (the export under its run name, or how to make one)."""
    shown = [(k, v) for k, v in metrics.items() if k.startswith(("reward/", "loss", "val/", "rollout_is/weight"))]
    width = max(len(k) for k, _ in shown) if shown else 0
    lines = ["training finished; last step:",
             *(f"  {k:<{width}}  {v:.4f}" for k, v in shown),
             f"  metrics: {output_dir / 'metrics.jsonl'}"]
    if exported is not None:
        lines.append(f"  export:  {exported}   (evaluate: vbench-async run --model {exported} ...)")
    else:
        lines.append("  no export (checkpoint.export: false); make one with python -m vbench_async.train --export "
                     f"{output_dir / 'checkpoints'}/step-N --to DIR")
    return "\n".join(lines)


if __name__ == "__main__":
    from ..process_exit import exit_now

    exit_now(main())
