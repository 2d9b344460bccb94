"""One torchrun rank of tests/test_train_pool.py: `redistribute` moves real groups (encoded prompt tensors, responses,
a request whose frames stay behind) from the rank with a surplus to the rank short of its share."""

from __future__ import annotations

import json
import sys

import numpy as np
import torch

from vbench_async.backends.base import Request, VideoInput
from vbench_async.train.config import FSDPConfig
from vbench_async.train.fsdp import close_distributed, init_distributed
from vbench_async.train.policy import Encoded
from vbench_async.train.pool import plan_pool, redistribute, round_counts
from vbench_async.train.rollout import Group, Response


def group(rank: int, i: int) -> Group:
    frames = np.zeros((4, 8, 8, 3), dtype=np.uint8)
    request = Request(request_id=f"r{rank}-{i}", prompt="p", videos=(VideoInput(frames=frames, metadata={}, uuid="v"),))
    encoded = Encoded(torch.arange(5) + 10 * rank + i, None, {"pixel_values_videos": torch.full((2, 3), float(i))})
    return Group(item=None, request=request, responses=[Response([1, 2, i], f"{rank}/{i}", reward=float(i))],
                 encoded=encoded)


def main() -> None:
    info = init_distributed(FSDPConfig(timeout_s=60))
    kept = [group(info.rank, i) for i in range(3 if info.rank == 0 else 0)]  # rank 1 kept nothing
    counts = [round_counts(len(kept), info)]
    mine = redistribute(kept, plan_pool(counts, 2), info)
    row = [{"text": g.responses[0].text, "ids": g.encoded.input_ids.tolist(),
            "pixels": g.encoded.media["pixel_values_videos"].sum().item(), "videos": len(g.request.videos)}
           for g in mine]
    with open(f"{sys.argv[1]}.{info.rank}", "w") as fh:
        json.dump({"counts": counts, "groups": row}, fh)
    close_distributed()


if __name__ == "__main__":
    main()
