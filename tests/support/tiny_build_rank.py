"""Run by torchrun with 2 ranks (tests/test_tiny_models.py): rank 1 builds a tiny model inside the process group
while rank 0 waits, then rank 0 reads what was published. Prints one JSON line per rank."""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist

from vbench_async.demo.tiny_models import ensure_tiny_model

dist.init_process_group("gloo")
rank, name = dist.get_rank(), sys.argv[1]
error = None
if rank == 1:  # the rank that wins the build lock is not global rank 0
    try:
        ensure_tiny_model(name)
    except Exception as exc:  # reported, not raised: rank 0 must still reach the barrier
        error = f"{type(exc).__name__}: {exc}"
dist.barrier()
path = ensure_tiny_model(name) if rank == 0 else None
# One write per line: both ranks share torchrun's stdout, and print's text and newline, written apart, interleave.
line = json.dumps({"rank": rank, "error": error, "files": sorted(os.listdir(path)) if path else None}) + "\n"
sys.stdout.write(line)
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
