"""DAPO's dynamic sampling fills the global batch from one pool of all ranks' kept groups (pool.py).

The plan is checked as a pure function, the exchange with 2 ranks (tests/support/pool_worker.py); the slow 2-rank
training launch (real torchrun, gloo, tiny-qwen2.5-vl, text only) makes
rank 1's prompts useless (no offline answer: a random model's 4 tokens all score 0, so dynamic sampling drops every
one of its groups) while rank 0's carry a signal (an offline answer mixed in). Before the pool, ranks were cut to the
smallest count, so this run trained on nothing; now rank 0 sends its second kept group to rank 1 and the step trains
on exactly the configured 2 groups. Step 2 keeps only 1 group in its 2 rounds: every rank gets 1 // 2 = 0 groups and
the shortfall is reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vbench_async.train.pool import plan_pool

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("counts, target, share, keep, moves", [
    ([[1, 0], [1, 0]], 2, 1, [[0], []], [(0, 1, 1)]),  # rank 0's surplus fills rank 1
    ([[2, 2]], 4, 2, [[0, 1], [0, 1]], []),  # nothing to move
    ([[3, 0, 1]], 3, 1, [[0], [], []], [(0, 1, 1), (0, 2, 2)]),  # the first `target` in (round, rank) order
    ([[0, 1], [3, 2]], 4, 2, [[0, 1], [0]], [(0, 2, 1)]),  # round 0's group first, then round 1's by rank
    ([[1, 0], [0, 0]], 2, 0, [[], []], []),  # ran out: 1 group cannot be split over 2 ranks
    ([[2, 1, 0, 0], [2, 0, 0, 0]], 4, 1, [[0], [0], [], []], [(0, 1, 2), (0, 2, 3)]),
])
def test_plan_pool(counts, target, share, keep, moves):
    plan = plan_pool(counts, target)
    assert (plan.share, plan.keep, plan.moves) == (share, keep, moves)
    for rank in range(len(keep)):  # every rank ends with exactly its share
        assert len(plan.keep[rank]) + sum(1 for m in plan.moves if m[2] == rank) == plan.share


def test_ran_out_shares_what_there_is_equally():
    plan = plan_pool([[3, 0, 0], [0, 1, 0]], 6)  # 4 kept of 6 over 3 ranks: 1 each, 1 left over
    assert plan.share == 1 and plan.total == 3
    assert sorted(len(k) + sum(1 for m in plan.moves if m[2] == r) for r, k in enumerate(plan.keep)) == [1, 1, 1]


def test_two_ranks_exchange_groups(tmp_path):
    """Rank 0 kept 3 groups, rank 1 none: with a global batch of 2, rank 0 keeps its first and sends its second."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(REPO / "tests" / "support" / "pool_worker.py"), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=240, cwd=REPO, env={**env, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"out.{r}").read_text()) for r in (0, 1))
    assert rank0["counts"] == rank1["counts"] == [[3, 0]]
    assert [g["text"] for g in rank0["groups"]] == ["0/0"] and rank0["groups"][0]["videos"] == 1
    assert rank1["groups"] == [{"text": "0/1", "ids": [1, 2, 3, 4, 5], "pixels": 6.0, "videos": 0}]  # frames stay
    assert rank0["exact"] == rank1["exact"] == [True]  # the received group is the sent one, field by field
    assert rank0["costs"] == rank1["costs"] == [[0.0, 1.0, 2.0], [100.0]]  # uneven lengths, no objects


def _records(path: Path) -> None:
    def record(i: int, offline: bool) -> dict:
        rec = {"problem_id": f"q{i}", "problem": f"Which letter is number {i % 4 + 1} of A, B, C, D?",
               "problem_type": "multiple choice", "options": ["A. A", "B. B", "C. C", "D. D"],
               "solution": f"<answer>{'ABCD'[i % 4]}</answer>"}
        return {**rec, "offline_response": rec["solution"]} if offline else rec
    # In order (no shuffle), 2 prompts per round: rank 0 takes the even positions, rank 1 the odd ones.
    path.write_text(json.dumps([record(i, offline) for i, offline in enumerate(
        [True, False, True, False, True, False, False, False])]))


@pytest.mark.slow  # a whole 2-rank training launch (~40 s on 2 cores)
def test_two_ranks_fill_the_global_batch_from_one_pool(tmp_path):
    _records(tmp_path / "train.json")
    out = tmp_path / "run"
    cfg = {
        "model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 3,
        "data": {"records": str(tmp_path / "train.json"), "cache_dir": str(tmp_path / "cache"), "shuffle": False},
        "rollout": {"n": 4, "max_tokens": 4, "offline_per_group": 1},
        "algorithm": {"name": "dapo", "max_sampling_tries": 1},
        "train": {"steps": 2, "prompts_per_step": 2, "micro_batch_size": 4, "lr": 1e-3},
        "fsdp": {"timeout_s": 90},
        "checkpoint": {"export": False},
        "logging": {"progress": False},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "vbench_async.train", "--config", str(path)], capture_output=True, text=True,
                          timeout=420, cwd=REPO, env={**env, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    first, second = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # Step 1: 2 rounds of 2 prompts; rank 1's 2 groups dropped, rank 0's 2 kept, one of them moved to rank 1.
    assert first["rollout/groups"] == 4 and first["rollout/dropped"] == 2
    assert first["rollout/moved"] == 1 and first["rollout/short"] == 0
    assert first["loss"] is not None and first["grad_norm"] > 0  # both ranks trained (on one group each)
    # Step 2: 1 group kept in 2 rounds: nothing to train on, and the log says so.
    assert second["rollout/dropped"] == 3 and second["rollout/short"] == 2 and second["loss"] is None
    assert "the global batch holds 0 of 2 groups after 2 rollout round(s) (1 kept in all)" in proc.stderr


def test_a_tensor_parallel_group_rolls_out_its_ranks_prompts_together():
    from vbench_async.train.collect import engine_share

    batch = list(range(100, 108))  # 8 prompts over 4 ranks, TP 2: ranks 0-1 share an engine, ranks 2-3 another
    shares = [engine_share(batch, rank, 4, 2) for rank in range(4)]
    assert [s[0] for s in shares] == [[100, 101, 102, 103]] * 2 + [[104, 105, 106, 107]] * 2  # same prompts
    own = [[engine[i] for i in positions] for engine, positions in shares]
    assert own == [[100, 101], [102, 103], [104, 105], [106, 107]]  # each rank trains on the share it has at TP 1
    assert engine_share(batch, 3, 4, 1) == ([106, 107], range(0, 2))


def test_engine_batching_limits_come_from_the_step_unless_set():
    from vbench_async.train.config import RolloutConfig
    from vbench_async.train.vllm_rollout import engine_limits

    assert engine_limits(RolloutConfig(n=8, max_model_len=16384), prompts_per_call=4) == {
        "max_num_seqs": 32, "max_num_batched_tokens": 16384}
    assert engine_limits(RolloutConfig(n=8, max_model_len=4096, max_num_seqs=12), 4) == {
        "max_num_seqs": 12, "max_num_batched_tokens": 8192}


def test_balancing_swaps_groups_from_the_costliest_rank_to_the_cheapest():
    from vbench_async.train.pool import balance_plan, rank_loads

    costs = [[100.0, 90.0], [10.0, 5.0]]  # rank 0 kept two video groups, rank 1 two text groups
    plan = plan_pool([[2, 2]], 4)
    assert rank_loads(plan, costs) == [190.0, 15.0] and plan.moves == []
    balanced = balance_plan(plan, costs, max_swaps=4)
    assert rank_loads(balanced, costs) == [100.0, 105.0]  # one video group each
    assert balanced.keep == [[1], [1]] and balanced.moves == [(0, 0, 1), (1, 0, 0)]  # one swap, two moves
    # counts stay equal; an even plan is left alone; a swap that would not lower the costliest rank is not made
    even = [[50.0, 50.0], [60.0, 40.0]]
    assert balance_plan(plan, even, 4) == plan
    assert balance_plan(plan_pool([[1, 1]], 2), [[100.0], [10.0]], 4).moves == []
