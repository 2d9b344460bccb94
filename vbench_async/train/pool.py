"""The global group pool: every rank trains on its exact share of one global batch of kept groups.

Each rollout round, every rank rolls out its share of the round's prompts and keeps some groups (dynamic sampling
drops groups whose rewards are all equal; a failed or over-long prompt leaves none). The ranks report how many they
kept (one all-reduce per round) and roll again until the pool holds `target` groups (the configured
`train.prompts_per_step`) or the rounds are used up, as verl's DAPO fills its batch. Then the pool is cut to its
first `target` groups in (round, rank, position) order and redistributed: a rank keeps up to its share of its own
selected groups and sends the surplus point to point to ranks short of theirs, so every rank ends with exactly
`target / world` groups. When the rounds run out first, every rank gets `total // world` (ranks must hold equal counts:
they run the same forward/backward passes), and the shortfall is logged (`rollout/short`).

The plan is a pure function of the per-round counts and the groups' costs (their sequences' tokens, all-gathered
once), which every rank knows, so all ranks agree on it; transfers run in one global order, which keeps the blocking
sends and receives from deadlocking. With `train.balance_ranks`, groups are then swapped between the costliest and
the cheapest rank while that lowers the costliest (`balance_plan`): sequence-length balancing across ranks, moving
only the groups that buy it. Nothing is pickled (object collectives would): costs travel as a padded float tensor,
groups in the typed wire format of `wire.py` (safetensors + JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from .fsdp import DistInfo, all_reduce
from .rollout import Group
from .wire import recv_groups, send_groups


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


def balance_plan(plan: PoolPlan, costs: list[list[float]], max_swaps: int) -> PoolPlan:
    """`plan` with its ranks' costs evened out by swapping groups between the costliest and the cheapest rank.

    costs[rank][position] is a group's forward cost (its sequences' tokens). Each swap exchanges the pair of groups
    that most lowers the larger of the two ranks' loads, and stops when no swap helps, so the counts stay equal and
    only the groups that buy balance move (a full re-sort would move almost every group every step)."""
    world = len(plan.keep)
    held: list[list[tuple[int, int]]] = [[(r, p) for p in plan.keep[r]] for r in range(world)]
    for src, pos, dst in plan.moves:
        held[dst].append((src, pos))

    def cost(g: tuple[int, int]) -> float:
        return costs[g[0]][g[1]]

    loads = [sum(map(cost, mine)) for mine in held]
    for _ in range(max_swaps):
        hi = max(range(world), key=lambda r: (loads[r], -r))
        lo = min(range(world), key=lambda r: (loads[r], r))
        best: tuple[float, int, int] | None = None
        for i, a in enumerate(held[hi]):
            for j, b in enumerate(held[lo]):
                delta = cost(a) - cost(b)
                worst = max(loads[hi] - delta, loads[lo] + delta)
                if delta > 0 and worst < loads[hi] and (best is None or worst < best[0]):
                    best = (worst, i, j)
        if best is None:
            break
        _, i, j = best
        a, b = held[hi][i], held[lo][j]
        held[hi][i], held[lo][j] = b, a
        loads[hi] += cost(b) - cost(a)
        loads[lo] += cost(a) - cost(b)
    keep = [sorted(p for r, p in held[rank] if r == rank) for rank in range(world)]
    moves = sorted((r, p, rank) for rank in range(world) for r, p in held[rank] if r != rank)
    return PoolPlan(plan.share, keep, moves)


def rank_loads(plan: PoolPlan, costs: list[list[float]]) -> list[float]:
    """Each rank's total cost under `plan`."""
    loads = [sum(costs[r][p] for p in plan.keep[r]) for r in range(len(plan.keep))]
    for src, pos, dst in plan.moves:
        loads[dst] += costs[src][pos]
    return loads


def gather_costs(costs: list[float], info: DistInfo) -> list[list[float]]:
    """Every rank's list of group costs (one small all-gather)."""
    if info.world == 1:
        return [costs]
    # Plain tensors, no objects (object collectives pickle): the lengths first, then the costs padded to the longest.
    size = torch.tensor([len(costs)], dtype=torch.int64, device=info.device)
    sizes = [torch.zeros_like(size) for _ in range(info.world)]
    dist.all_gather(sizes, size)
    counts = [int(s.item()) for s in sizes]
    mine = torch.zeros(max(1, *counts), dtype=torch.float64, device=info.device)  # float64: token counts stay exact
    mine[: len(costs)] = torch.tensor(costs, dtype=torch.float64, device=info.device)
    rows = [torch.zeros_like(mine) for _ in range(info.world)]
    dist.all_gather(rows, mine)
    return [row[:n].tolist() for row, n in zip(rows, counts)]


def round_counts(kept: int, info: DistInfo) -> list[int]:
    """Every rank's count of kept groups this round (one all-reduce)."""
    row = [0.0] * info.world
    row[info.rank] = float(kept)
    return [int(v) for v in all_reduce(row, info)]


def redistribute(groups: list[Group], plan: PoolPlan, info: DistInfo) -> list[Group]:
    """This rank's share: its kept groups, then those other ranks send it (point to point)."""
    out = [groups[pos] for pos in plan.keep[info.rank]]
    pairs: dict[tuple[int, int], list[int]] = {}  # one message per (sender, receiver), in the plan's order
    for src, pos, dst in plan.moves:
        pairs.setdefault((src, dst), []).append(pos)
    for (src, dst), positions in pairs.items():
        if info.rank == src:
            send_groups([groups[p] for p in positions], dst, info)  # typed wire format, without the media
        elif info.rank == dst:
            out.extend(recv_groups(src, info))
    return out

