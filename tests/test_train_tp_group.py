"""A tensor-parallel group's ranks pass the same requests to their shared engine, in the same calls (tp_group.py).

The agreement is checked as a pure function over simulated ranks whose requests arrive at random moments, some
failing on one rank only; then two real ranks (torchrun, gloo; tests/support/tp_worker.py) validate as one TP group
behind an engine call that is a real collective, and share the video headers rank 0 probed.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import launcher_env

from vbench_async.train.tp_group import TPGroup, agree

REPO = Path(__file__).resolve().parents[1]


def test_a_group_is_a_run_of_consecutive_ranks():
    groups = [TPGroup(rank, 8, 4) for rank in range(8)]
    assert [g.index for g in groups] == [0] * 4 + [1] * 4 and {g.count for g in groups} == {2}
    assert [g.peer for g in groups] == [0, 1, 2, 3] * 2
    assert groups[5].ranks == range(4, 8) and TPGroup(3, 4).ranks == range(3, 4)  # TP 1: a group of one


def test_collection_sends_what_every_peer_could_build():
    posts = [["0", "1", "2", "3"], ["0", "2", "3"]]  # position 1's video could not be read on rank 1
    assert [agree(posts, me).batch for me in (0, 1)] == [["0", "2", "3"]] * 2


def _simulate(streams: list[list[str]], limit: int, seed: int,
              capacity: int = 4) -> tuple[list[list[list[str]]], list[set[str]]]:
    """Ranks whose requests arrive in their stream's order, a random number at a time, agreeing before every call
    as RolloutBackend does: a rank posts once it holds a request (or has none left to come: None), and after a round
    with nothing in common it waits for one more arrival (if any is left). A rank holds at most `capacity` requests
    (the pipeline's requests in flight): one it holds forever blocks a slot. Returns each rank's engine calls and
    the requests each failed."""
    rng = random.Random(seed)
    arrived = [0] * len(streams)
    held: list[list[str]] = [[] for _ in streams]
    calls: list[list[list[str]]] = [[] for _ in streams]
    failed: list[set[str]] = [set() for _ in streams]
    closed, previous = False, None
    need_new = False
    while not closed:
        for r, stream in enumerate(streams):
            more = min(rng.randint(1 if (need_new or not held[r]) else 0, 3), capacity - len(held[r]))
            held[r] += stream[arrived[r]: arrived[r] + more]
            arrived[r] = min(len(stream), arrived[r] + more)
        posts = [list(h) if h or arrived[r] < len(streams[r]) else None for r, h in enumerate(held)]
        if all(p is None for p in posts):
            break
        results = [agree(posts, r, limit, previous) for r in range(len(streams))]
        previous = posts
        assert len({tuple(a.batch) for a in results}) == 1 and len({a.closed for a in results}) == 1
        closed, need_new = results[0].closed, not results[0].batch
        for r, a in enumerate(results):
            assert len(a.batch) <= limit
            if a.batch:
                calls[r].append(a.batch)
            failed[r] |= set(a.drop)
            held[r] = [i for i in held[r] if i not in set(a.batch) | set(a.drop)]
    for r, stream in enumerate(streams):  # a closed group fails what is left, and all that would still arrive
        failed[r] |= set(held[r]) | set(stream[arrived[r]:])
    return calls, failed


@pytest.mark.parametrize("seed", range(40))
def test_peers_agree_on_every_batch_whenever_their_requests_arrive(seed):
    plan = [f"s{i:02d}" for i in range(30)]
    rng = random.Random(seed)
    ranks = 2 + seed % 3
    lost = [set(rng.sample(plan, rng.randint(0, 3))) if seed % 2 else set() for _ in range(ranks)]
    streams = [[i for i in plan if i not in lost[r]] for r in range(ranks)]  # one loader: the plan's order
    calls, failed = _simulate(streams, limit=rng.choice([1, 4, 64]), seed=seed)
    everywhere = [i for i in plan if not any(i in gone for gone in lost)]
    assert all(c == calls[0] for c in calls)  # same prompts, same batches, same order on every rank
    assert [i for batch in calls[0] for i in batch] == everywhere  # each exactly once, in the plan's order
    for r in range(ranks):  # what a peer lost fails here, nothing else
        assert failed[r] == set(streams[r]) - set(everywhere)


def test_a_finished_peer_closes_the_group_and_a_stuck_one_too():
    done = [agree([["a", "b"], None], me) for me in (0, 1)]
    assert done[0].closed and done[0].drop == ["a", "b"] and done[1].closed and done[1].drop == []
    posts = [["a"], ["b"]]  # each holds what the other lost, nothing in common
    assert not agree(posts, 0).closed and agree(posts, 0).drop == []  # the first time: wait for more
    again = agree(posts, 0, previous=posts)
    assert again.closed and again.drop == ["a"]


def test_two_ranks_validate_and_collect_as_one_tp_group_and_share_rank_0s_headers(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(REPO / "tests" / "support" / "tp_worker.py"), str(tmp_path), str(tmp_path / "seen")],
                          capture_output=True, text=True, timeout=400, cwd=REPO, env=launcher_env())
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    rank0, rank1 = (json.loads((tmp_path / f"seen.{r}").read_text()) for r in (0, 1))
    # Headers: probed once, by rank 0 (two videos and the corrupt one), the same on both ranks.
    assert (rank0["probed"], rank1["probed"]) == (3, 0)
    assert rank0["headers"] == rank1["headers"] and rank0["headers"]["corrupt.mp4"] is None
    # Validation: the same engine calls on both ranks, every good question sent exactly once.
    assert rank0["mismatched"] == rank1["mismatched"] == 0
    assert rank0["calls"] == rank1["calls"]
    sent = [i.split("#")[0] for call in rank0["calls"] for i in call]
    assert sorted(sent) == sorted(f"mvbench/q{i}" for i in range(8))
    # One run directory, the leader's, with every question (the corrupt one failed); the peer's scratch is gone.
    for seen in (rank0, rank1):
        seen["scores"].pop("time/validation_s")
    assert rank0["scores"] == rank1["scores"] and rank0["scores"]["val/samples"] == 9.0
    assert rank0["scores"]["val/failed"] == 1.0
    assert len(rank0["calls"]) > 1  # several calls: arrivals and calls interleaved
    # Collection: the group's 4 prompts in one call, the same on both ranks; each trains on 2 of them.
    assert rank0["collect_calls"] == rank1["collect_calls"] and len(rank0["collect_calls"]) == 1
    assert sorted(rank0["collect_calls"][0]) == [f"step0-r0-{i}" for i in range(4)]
    assert len(rank0["kept"]) == len(rank1["kept"]) == 2 and sorted(rank0["kept"] + rank1["kept"]) == [0, 1, 2, 3]
    assert rank0["run_dir"] and not rank0["peer_dir_left"] and not rank1["peer_dir_left"]
