"""The global group pool: every rank trains on its exact share of one global batch of kept groups.

Each rollout round, every rank rolls out its share of the round's prompts and keeps some groups (dynamic sampling
drops groups whose rewards are all equal; a failed or over-long prompt leaves none). The ranks report how many they
kept (one all-reduce per round) and roll again until the pool holds `target` groups (the configured
`train.prompts_per_step`) or the rounds are used up, as verl's DAPO fills its batch. Then the pool is cut to its
first `target` groups in (round, rank, position) order and redistributed: a rank keeps up to its share of its own
selected groups and sends the surplus point to point to ranks short of theirs, so every rank ends with exactly
`target / world` groups. When the rounds run out first, every rank gets `total // world` (ranks must hold equal counts:
they run the same forward/backward passes), and the shortfall is logged (`rollout/short`).

The plan is a pure function of the per-round counts, which every rank knows, so all ranks agree on it without
another exchange; transfers run in one global order, which keeps the blocking sends and receives from deadlocking.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

import torch.distributed as dist

from .fsdp import DistInfo, all_reduce

T = TypeVar("T")


@dataclass(frozen=True)
class PoolPlan:
    share: int  # groups each rank trains on
    keep: list[list[int]]  # per rank: positions (in its own kept list) it keeps
    moves: list[tuple[int, int, int]]  # (from rank, position there, to rank), in the order they are carried out

    @property
    def total(self) -> int:
        return self.share * len(self.keep)


def plan_pool(counts: list[list[int]], target: int) -> PoolPlan:
    """The redistribution, from counts[round][rank] = groups a rank kept in that round."""
    world = len(counts[0]) if counts else 1
    available = sum(map(sum, counts))
    selected = min(target, available)
    share = selected // world if selected < target else target // world
    # The first `selected` groups in (round, rank, position) order, as positions in each rank's own kept list.
    chosen: list[list[int]] = [[] for _ in range(world)]
    seen, left = [0] * world, selected
    for row in counts:
        for rank, n in enumerate(row):
            take = min(n, left)
            chosen[rank].extend(range(seen[rank], seen[rank] + take))
            seen[rank] += n
            left -= take
    keep = [mine[:share] for mine in chosen]
    surplus = [(rank, pos) for rank, mine in enumerate(chosen) for pos in mine[share:]]
    wanting = [rank for rank in range(world) for _ in range(share - len(keep[rank]))]
    moves = [(src, pos, dst) for (src, pos), dst in zip(surplus, wanting)]
    return PoolPlan(share, keep, moves)


def round_counts(kept: int, info: DistInfo) -> list[int]:
    """Every rank's count of kept groups this round (one all-reduce)."""
    row = [0.0] * info.world
    row[info.rank] = float(kept)
    return [int(v) for v in all_reduce(row, info)]


def redistribute(groups: list[T], plan: PoolPlan, info: DistInfo) -> list[T]:
    """This rank's share: its kept groups, then those other ranks send it (point to point)."""
    out = [groups[pos] for pos in plan.keep[info.rank]]
    pairs: dict[tuple[int, int], list[int]] = {}  # one message per (sender, receiver), in the plan's order
    for src, pos, dst in plan.moves:
        pairs.setdefault((src, dst), []).append(pos)
    for (src, dst), positions in pairs.items():
        if info.rank == src:
            dist.send_object_list([[_portable(groups[p]) for p in positions]], dst=dst, device=info.device)
        elif info.rank == dst:
            box: list = [None]
            dist.recv_object_list(box, src=src, device=info.device)
            out.extend(box[0])
    return out


def _portable(group: T) -> T:
    """A group without its request's frames and images (the receiver needs the encoded prompt, not the media)."""
    request = getattr(group, "request", None)
    if request is None:
        return group
    return dataclasses.replace(group, request=dataclasses.replace(request, videos=(), images=()))  # type: ignore
