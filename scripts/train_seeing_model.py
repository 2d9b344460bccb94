"""Train a tiny model to answer the synthetic generator's questions from the pixels (experimental: docs/seeing-models.md
says how far the recipe gets today).

    .venv/bin/python scripts/train_seeing_model.py tiny-qwen2.5-vl --out FILE.safetensors [--steps 8000] [--work DIR]

The recipe is `vbench_async.train.seeing.SeeingConfig` (its fields are this script's options). Writes FILE and
FILE.json (the recipe and the training's figures) beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from vbench_async.demo.tiny_models import QWEN_TINY_MODELS
    from vbench_async.train.seeing import SeeingConfig, train

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", choices=[m for m in QWEN_TINY_MODELS if m != "tiny-qwen2-vl"])
    for f in dataclasses.fields(SeeingConfig):
        if f.name != "base":
            kind = type(f.default)
            if kind is bool:
                p.add_argument(f"--{f.name.replace('_', '-')}", action=argparse.BooleanOptionalAction,
                               default=f.default, help=f.metadata["help"].replace("%", "%%"))
            else:
                p.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default,
                               help=f"{f.metadata['help'].replace('%', '%%')} (default: {f.default})")
    p.add_argument("--out", type=Path, required=True, help="weights file to write (bf16 safetensors)")
    p.add_argument("--work", type=Path, default=Path(os.environ.get("VBENCH_ASYNC_HOME", Path.home() / ".cache"
                                                                   / "vbench-async")) / "seeing-train",
                   help="generated training videos and their frames, kept between trainings")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = SeeingConfig(base=args.base, **{f.name: getattr(args, f.name) for f in dataclasses.fields(
        SeeingConfig) if f.name != "base"})
    out = args.out
    figures = train(cfg, out, args.work)
    out.with_suffix(".json").write_text(json.dumps({"recipe": dataclasses.asdict(cfg), "figures": figures},
                                                   indent=1) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): {figures}")


if __name__ == "__main__":
    main()
