"""One torchrun rank of tests/test_train_pool.py: `redistribute` moves real groups (encoded prompt tensors, responses,
a request whose frames stay behind) from the rank with a surplus to the rank short of its share, in the typed wire
format; `gather_costs` gathers lists of different lengths as plain tensors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from vbench_async.backends.base import Request, SamplingParams, VideoInput
from vbench_async.samples import Sample
from vbench_async.train.config import FSDPConfig
from vbench_async.train.data import TrainItem
from vbench_async.train.fsdp import close_distributed, init_distributed
from vbench_async.train.policy import Encoded
from vbench_async.train.pool import gather_costs, plan_pool, redistribute, round_counts
from vbench_async.train.rollout import Group, Response
from vbench_async.train.wire import encode_groups, portable


def group(rank: int, i: int) -> Group:
    frames = np.zeros((4, 8, 8, 3), dtype=np.uint8)
    request = Request(request_id=f"r{rank}-{i}", prompt="p", videos=(VideoInput(frames=frames, metadata={}, uuid="v"),),
                      sampling=SamplingParams(temperature=1.0, seed=i), n=2)
    media = {"pixel_values_videos": torch.full((2, 3), float(i)), "video_grid_thw": torch.tensor([[1, 2, 2]]),
             "second_per_grid_ts": torch.tensor([0.5], dtype=torch.bfloat16)}
    encoded = Encoded(torch.arange(5) + 10 * rank + i, torch.zeros(5, dtype=torch.long), media)
    item = TrainItem(i, Sample("b", str(i), "multiple choice", "q?", "<answer>A</answer>", options=("A. x", "B. y"),
                               window=(1.0, None), fields={"k": [1, "v"]}),
                     "p", video=Path("v.mp4"), window=(1.0, None))
    responses = [Response([1, 2, i], f"{rank}/{i}", reward=float(i), rollout_logp=[-0.1 * i, -1 / 3, float("-inf")]),
                 Response([7], "x", offline=True, finished=False, accuracy=1.0, format=0.5)]
    return Group(item=item, request=request, responses=responses, advantages=[0.25, -0.25], encoded=encoded)


def main() -> None:
    info = init_distributed(FSDPConfig(timeout_s=60))
    kept = [group(info.rank, i) for i in range(3 if info.rank == 0 else 0)]  # rank 1 kept nothing
    counts = [round_counts(len(kept), info)]
    mine = redistribute(kept, plan_pool(counts, 2), info)
    costs = gather_costs([float(100 * info.rank + i) for i in range(3 - 2 * info.rank)], info)  # 3 and 1 costs
    # Byte-equal encodings: every field, every tensor's dtype and bytes arrived as rank 0 built them.
    sent = [portable(group(0, int(g.responses[0].text.split("/")[1]))) for g in mine]
    exact = [encode_groups([portable(g)]) == encode_groups([s]) for g, s in zip(mine, sent)]
    row = [{"text": g.responses[0].text, "ids": g.encoded.input_ids.tolist(),
            "pixels": g.encoded.media["pixel_values_videos"].sum().item(), "videos": len(g.request.videos)}
           for g in mine]
    with open(f"{sys.argv[1]}.{info.rank}", "w") as fh:
        json.dump({"counts": counts, "groups": row, "exact": exact, "costs": costs}, fh)
    close_distributed()


if __name__ == "__main__":
    main()
