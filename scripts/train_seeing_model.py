"""Train a seeing model: a tiny model taught to answer the seeing suite from the pixels (docs/seeing-models.md).

    .venv/bin/python scripts/train_seeing_model.py tiny-qwen2.5-vl [--out FILE.safetensors] [--steps N] [--work DIR]

The recipe is `vbench_async.train.seeing.SeeingConfig` (its fields are this script's options; the defaults made the
committed weights). Writes FILE (default: the committed weights of the family's seeing model,
vbench_async/demo/weights/seeing-<family>.safetensors) and FILE.json (the recipe and the training's figures).
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
    from vbench_async.demo.tiny_models import QWEN_TINY_MODELS, SEEING_MODELS, seeing_weights
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
    p.add_argument("--out", type=Path, default=None,
                   help="weights file to write (bf16 safetensors; default: the seeing model's committed weights)")
    p.add_argument("--work", type=Path, default=Path(os.environ.get("VBENCH_ASYNC_HOME", Path.home() / ".cache"
                                                                   / "vbench-async")) / "seeing-train",
                   help="generated training videos and their frames, kept between trainings")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = SeeingConfig(base=args.base, **{f.name: getattr(args, f.name) for f in dataclasses.fields(
        SeeingConfig) if f.name != "base"})
    out = args.out or seeing_weights(next(name for name, base in SEEING_MODELS.items() if base == args.base))
    figures = train(cfg, out, args.work)
    out.with_suffix(".json").write_text(json.dumps({"recipe": dataclasses.asdict(cfg), "figures": figures},
                                                   indent=1) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): {figures}")


if __name__ == "__main__":
    main()
