"""The ranks that share one tensor-parallel rollout engine, and how they agree on what it generates.

With `rollout.tensor_parallel_size` T > 1 each run of T consecutive ranks drives one vLLM engine sharded over their
GPUs (`external_launcher`): every `generate` is a collective of the group, so its ranks must pass the same prompts,
in the same order, in the same calls; a difference hangs the group or samples from mixed inputs. Collection takes the
group's prompts from one deterministic list (`collect.engine_share`) and validation gives the group one shard of the
held-out set, but what each rank can send may still differ: a video one rank cannot read, and in validation the
moment each request reaches the backend (the evaluation pipeline sends them as their frames load). So before each
engine call the ranks of a group post the ids they hold through the launcher's store (`Lockstep`) and every rank
computes the same `agree` of the posts: the ids all of them hold, in the group leader's order, up to a batch limit.

Validation's requests reach the backend in the same order on every rank of a group (one frame loader: the plan's
order, less the samples that failed before the engine), so a request one rank holds and another never will is one
the others have passed: an agreed id comes after it in this rank's order. It is failed here, not waited for.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Sequence

from . import watch

log = logging.getLogger(__name__)

POLL_S = 0.01  # store polling while the peers post: an engine call's agreement costs a few store round trips


@dataclass(frozen=True)
class TPGroup:
    """Rank `rank` of `world` in tensor-parallel groups of `size` consecutive ranks (inside one node)."""

    rank: int
    world: int
    size: int = 1

    @property
    def index(self) -> int:  # which group: the engine's data-parallel index
        return self.rank // self.size

    @property
    def count(self) -> int:
        return self.world // self.size

    @property
    def peer(self) -> int:  # position inside the group; 0 leads (writes what the group writes once)
        return self.rank % self.size

    @property
    def ranks(self) -> range:
        return range(self.index * self.size, (self.index + 1) * self.size)


@dataclass(frozen=True)
class Agreement:
    """One round's outcome, the same on every rank of a group except `drop`."""

    batch: list[str]  # what every rank of the group passes to the engine now, in this order
    drop: list[str] = field(default_factory=list)  # what this rank holds that no peer will ever send: fail it
    closed: bool = False  # a peer has finished, or the group is stuck: nothing more is generated together


def agree(posts: Sequence[Sequence[str] | None], me: int, limit: int | None = None,
          previous: Sequence[Sequence[str] | None] | None = None) -> Agreement:
    """The batch of ids every rank posted (None: that rank sends nothing more), in the first rank's order, at most
    `limit`. With no id in common for two rounds of the same posts (`previous`), the group is stuck: closed."""
    mine = list(posts[me] or ())
    if any(p is None for p in posts):
        return Agreement([], mine, closed=True)
    common = set(posts[0]).intersection(*(set(p) for p in posts[1:]))
    batch = [i for i in posts[0] if i in common][:limit]
    if not batch:
        stuck = previous is not None and [list(p or ()) for p in previous] == [list(p or ()) for p in posts]
        return Agreement([], mine if stuck else [], closed=stuck)
    last = mine.index(batch[-1])
    return Agreement(batch, [i for i in mine[:last] if i not in common])


class Lockstep:
    """Rounds of `agree` among the ranks of one group, through the launcher's store; `name` must be unique to the
    exchange (every rank of the group uses the same one and runs the same rounds)."""

    def __init__(self, name: str, group: TPGroup, timeout_s: float | None = None):
        self.name, self.group, self.timeout_s = name, group, timeout_s
        self.round = 0
        self.closed = False
        self._previous: list[list[str] | None] | None = None

    def agree(self, ids: Sequence[str], limit: int | None = None) -> Agreement:
        """This round's agreement on `ids` (this rank's, in its order). TimeoutError when a peer does not post
        within `timeout_s`."""
        if self.closed:
            return Agreement([], list(ids), closed=True)
        posted = watch.exchange(f"{self.name}/{self.round}", json.dumps(list(ids)), self.timeout_s,
                                ranks=self.group.ranks, poll_s=POLL_S)
        if posted is None:  # no store (a launcher without one): the ranks cannot compare, each goes alone
            if not self.round:
                log.warning("%s: no store to line the tensor-parallel group up through; each rank sends its own",
                            self.name)
            self.round += 1
            return Agreement(list(ids)[:limit])
        posts = [json.loads(p) for p in posted]
        result = agree(posts, self.group.peer, limit, self._previous)
        self._previous, self.closed = posts, result.closed
        if self.round:  # every peer posted this round, so each has read the one before
            watch.forget(f"{self.name}/{self.round - 1}")
        self.round += 1
        return result

    def finish(self) -> None:
        """This rank sends nothing more: a peer waiting in this round fails what it holds instead of waiting."""
        if not self.closed and self.group.size > 1:
            watch.post(f"{self.name}/{self.round}", "null")
        self.closed = True
