"""One torchrun rank of tests/test_train_tp_group.py: two ranks that share what a launch shares through the store.

- Video headers: rank 0 probes (kept under the frame cache), rank 1 receives rank 0's through the store.
- Validation on a tensor-parallel group of 2 (the whole world): both ranks run the group's shard of a held-out set
  on their own tiny HF engine, behind an engine call that is a real collective of the group, as a TP engine's is:
  each `generate` first all-gathers the request ids (gloo) and records whether the ranks passed the same ones. Each
  question has a window of its own (its frames load on their own, so requests arrive one by one), and rank 1's
  engine takes longer, so more of its requests wait for its next call than rank 0's: batched as they arrive, the
  two ranks' calls would differ.
- Collection on the same group: the group's prompts (both ranks' shares) in one engine call, the same on both ranks
  after they agree on the prompts both could build; each rank keeps its own share's groups.
Each rank writes what it saw to the JSON path argv[2].<rank>; argv[1] is the working folder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from held_out import held_out, validation_run

from vbench_async import models
from vbench_async.train import watch
from vbench_async.train.collect import Collector
from vbench_async.train.config import FSDPConfig, load_config
from vbench_async.train.data import DataOrder, MediaSource, frame_spec, load_items
from vbench_async.train.fsdp import close_distributed, init_distributed
from vbench_async.train.headers import HeaderFile, SharedHeaders
from vbench_async.train.rollout import HFRollout
from vbench_async.train.validation import peer_dir, run_dir, validate

QUESTIONS = 8  # on the two good videos, plus one on the corrupt video


class GroupEngine:
    """The tiny HF engine behind a collective of the group: the ranks' calls must carry the same requests."""

    def __init__(self, engine: HFRollout, rank: int):
        self.engine, self.rank = engine, rank
        self.kind, self.processor, self.ids, self.inputs = engine.kind, engine.processor, engine.ids, engine.inputs
        self.calls: list[list[str]] = []
        self.mismatched = 0

    def generate(self, requests):
        ids = [r.request_id for r in requests]
        self.mismatched += watch.broadcast_text(json.dumps(ids), src=0) != json.dumps(ids)  # rank 0's call vs this one
        self.calls.append(ids)
        if self.rank == 1:
            time.sleep(0.5)  # this rank's next requests pile up meanwhile
        return self.engine.generate(requests)

    def held_awake(self):
        return self.engine.held_awake()


def main() -> None:
    from vbench_async.demo.tiny_models import ensure_tiny_model

    root, out = Path(sys.argv[1]), sys.argv[2]
    info = init_distributed(FSDPConfig(timeout_s=120))
    watch.start_watch(info.rank, info.world, 60.0)
    if info.main:  # the data, before anyone reads it (a collective: both ranks are here)
        datamap = held_out(root)
        first = json.loads((root / "val.json").read_text())
        records = [{**first[0], "problem_id": f"q{i}", "path": f"v00{i % 2}.mp4", "start": 0.0, "end": 1.0 + i / 10}
                   for i in range(QUESTIONS)]
        (root / "val.json").write_text(json.dumps(records + [first[-1]]))  # the corrupt video's last
        (root / "train.json").write_text(json.dumps([  # text only: collection's prompts
            {"problem_id": f"t{i}", "problem": f"Which letter is number {i + 1}?", "problem_type": "multiple choice",
             "options": ["A. A", "B. B", "C. C", "D. D"], "solution": f"<answer>{'ABCD'[i]}</answer>"}
            for i in range(4)]))
        (root / "train.yaml").write_text(yaml.safe_dump({
            "model": "tiny-qwen2.5-vl", "output_dir": str(root / "out"),
            "data": {"records": str(root / "train.json"), "cache_dir": str(root / "cache"), "shuffle": False},
            "rollout": {"max_model_len": 1024, "max_tokens": 4, "n": 2, "tensor_parallel_size": 2},
            "train": {"prompts_per_step": 4},
            "validation": {"every": 1, "run": validation_run(datamap)}}))
    dist.barrier()

    videos = sorted(str(p) for p in (root / "suite" / "videos").glob("*.mp4"))
    file = HeaderFile(root / "cache", "held-out")
    headers = SharedHeaders(file, info.rank, info.world)(videos)

    model_dir = str(ensure_tiny_model("tiny-qwen2.5-vl"))
    engine = GroupEngine(HFRollout(model_dir, torch.device("cpu")), info.rank)
    cfg = load_config(root / "train.yaml")
    scores = validate(cfg, 1, info, engine, model_dir, root / "out")  # type: ignore[arg-type]
    validation_calls, engine.calls = engine.calls, []
    items = load_items(cfg.data)
    media = MediaSource(frame_spec(cfg.data, models.resolve(cfg.model)), cache_dir=cfg.data.cache_dir, workers=1)
    groups, _ = Collector(cfg, info, items, DataOrder(len(items), cfg.seed, False), media, engine).collect(0)
    with open(f"{out}.{info.rank}", "w") as fh:
        json.dump({"probed": file.probed, "headers": {Path(v).name: list(h) if h else None
                                                      for v, h in headers.items()},
                   "calls": validation_calls, "mismatched": engine.mismatched, "scores": scores,
                   "collect_calls": engine.calls, "kept": sorted(g.item.index for g in groups),
                   "run_dir": run_dir(root / "out", 1).is_dir(),
                   "peer_dir_left": peer_dir(root / "out", 1, info.rank).exists()}, fh)
    watch.stop_watch(finished=True)
    close_distributed()


if __name__ == "__main__":
    main()
