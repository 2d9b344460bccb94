"""One step's rollouts on one rank: prompts -> requests -> generation -> scored groups.

Nothing a single prompt does can stop the step: an item whose media cannot be loaded is skipped
(`data/media_failed`), a prompt longer than the engine's window minus `max_tokens` is skipped before generation
(`rollout/too_long`: it would be rejected, and with vLLM take the whole batch down with it), and a request the engine
still rejects comes back as None (`rollout/failed`). The groups kept on all ranks form one global pool, from which
every rank receives exactly its share of the global batch (pool.py): ranks must run the same number of
forward/backward passes, and the batch is the configured size whichever rank's prompts were dropped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from ..backends.base import SamplingParams
from ..errors import SampleError
from ..scoring.base import ScorerUnavailable
from . import algos
from .config import TrainConfig
from .data import DataOrder, MediaSource, TrainItem, rank_slice
from .fsdp import DistInfo
from .logger import Sums
from .policy import encode
from .pool import balance_plan, gather_costs, plan_pool, rank_loads, redistribute, round_counts
from .rollout import Group, make_responses, mix_offline, rollout_seed, score
from .tp_group import Lockstep, TPGroup

log = logging.getLogger(__name__)

SUMS = ("rollout/responses", "reward/sum", "reward/accuracy_sum", "reward/format_sum", "reward/overlong_sum",
        "response/tokens", "rollout/online", "reward/online_sum", "response/finished", "rollout/groups",
        "rollout/dropped", "rollout/failed", "rollout/too_long", "rollout/offline", "data/media_failed",
        "prompt/tokens", "time/media_s", "frames/decoded", "rollout/short", "rollout/moved")


def _tokens(group: Group) -> int:
    """A group's forward cost: its sequences' tokens (prompt, media tokens included, + response)."""
    return sum(len(group.encoded.input_ids) + len(r.token_ids) for r in group.responses)


def engine_share(batch: list[int], rank: int, world: int, tp: int) -> tuple[list[int], range]:
    """What this rank's engine rolls out (its TP group's shares together: every rank of the group sends the same
    prompts) and the positions in it that are this rank's own share (the same share as without TP)."""
    group = TPGroup(rank, world, tp)
    prompts = rank_slice(batch, group.index, group.count)
    per = len(prompts) // tp
    return prompts, range(group.peer * per, (group.peer + 1) * per)


class Collector:
    def __init__(self, cfg: TrainConfig, info: DistInfo, items: list[TrainItem], order: DataOrder,
                 media: MediaSource, rollout: Any):
        self.cfg, self.info, self.items, self.order, self.media, self.rollout = cfg, info, items, order, media, rollout
        self.tokenizer = rollout.processor.tokenizer
        self.max_prompt = cfg.rollout.max_model_len - cfg.rollout.max_tokens
        group = TPGroup(info.rank, info.world, cfg.rollout.tensor_parallel_size)
        # A TP group's engine call is a collective: its ranks agree on the prompts all of them could build.
        self.lockstep = Lockstep("collect", group, cfg.fsdp.timeout_s) if group.size > 1 else None

    def collect(self, step: int) -> tuple[list[Group], Sums]:
        """This rank's share of the step's global batch of groups (pool.py: filled from all ranks' rollouts)."""
        c = self.cfg
        target = c.train.prompts_per_step
        sums = Sums(*SUMS)
        kept: list[Group] = []
        counts: list[list[int]] = []
        rounds = 1 + (c.algorithm.max_sampling_tries if c.algorithm.dynamic_sampling else 0)
        for round_ in range(rounds):
            engine, own = engine_share(self.order.take(target), self.info.rank, self.info.world,
                                       c.rollout.tensor_parallel_size)
            groups = self._round([self.items[i] for i in engine], step, round_, sums, own)
            if c.algorithm.dynamic_sampling:
                varied = [g for g in groups if algos.varied_groups(torch.tensor([g.rewards]))[0]]
                sums.add("rollout/dropped", len(groups) - len(varied))
                groups = varied
            kept.extend(groups)
            counts.append(round_counts(len(groups), self.info))
            if sum(map(sum, counts)) >= target:
                break
        plan = plan_pool(counts, target)
        if c.train.balance_ranks and self.info.world > 1 and plan.share:  # the same decision on every rank
            costs = gather_costs([float(_tokens(g)) for g in kept], self.info)
            before = rank_loads(plan, costs)
            plan = balance_plan(plan, costs, max_swaps=self.info.world * plan.share)
            after = rank_loads(plan, costs)
            for name, loads in (("rollout/balance_before", before), ("rollout/balance_after", after)):
                mean = sum(loads) / len(loads)  # max over mean of the ranks' tokens; summed over ranks below
                sums.add(name, (max(loads) / mean if mean else 1.0) / self.info.world)
        if plan.total < target:
            sums.add("rollout/short", (target - plan.total) / self.info.world)  # summed over ranks: the shortfall
            if self.info.main:
                log.warning("the global batch holds %d of %d groups after %d rollout round(s) (%d kept in all)",
                            plan.total, target, len(counts), sum(map(sum, counts)))
        sums.add("rollout/moved", sum(1 for m in plan.moves if m[0] == self.info.rank))
        return redistribute(kept, plan, self.info), sums

    def _requests(self, items: list[TrainItem], step: int, round_: int, sums: Sums,
                  own: range) -> list[tuple[int, TrainItem, Any, Any]]:
        """(position, item, request, encoded prompt) of every item that can be rolled out; skips are counted for this
        rank's own positions only (the other ranks of its TP group count theirs)."""
        r = self.cfg.rollout
        k, gated = r.offline_per_group, r.offline_accuracy_threshold is not None
        decoded, media_s = self.media.decoded, 0.0
        out = []
        for pos, it in enumerate(items):
            n = r.n - k if (k and it.offline and not gated) else r.n
            sampling = SamplingParams(temperature=r.temperature, top_p=r.top_p, top_k=r.top_k, max_tokens=r.max_tokens,
                                      seed=rollout_seed(self.cfg.seed, step, round_, it.index))
            try:
                started = time.perf_counter()
                req = self.media.request(it, sampling, n, f"step{step}-r{round_}-{it.index}")
                media_s += time.perf_counter() - started  # frames and images only (the processor comes next)
                encoded = encode(self.rollout.inputs(req))
            except SampleError as exc:  # FrameError included: a video that cannot be decoded now
                log.warning("skipping %s at step %d: %s: %s", it.sample.key, step + 1, exc.kind, exc)
                sums.add("data/media_failed", pos in own)
                continue
            if len(encoded.input_ids) > self.max_prompt:
                log.warning("skipping %s: its prompt has %d tokens, more than rollout.max_model_len - max_tokens "
                            "= %d", it.sample.key, len(encoded.input_ids), self.max_prompt)
                sums.add("rollout/too_long", pos in own)
                continue
            out.append((pos, it, req, encoded))
        sums.add("time/media_s", media_s)
        sums.add("frames/decoded", self.media.decoded - decoded)
        return out

    def _round(self, items: list[TrainItem], step: int, round_: int, sums: Sums, own: range) -> list[Group]:
        """The groups of this rank's `own` positions of `items` (all of which its engine rolls out)."""
        r, a = self.cfg.rollout, self.cfg.algorithm
        ready = self._requests(items, step, round_, sums, own)
        if self.lockstep is not None:
            agreed = set(self.lockstep.agree([str(pos) for pos, *_ in ready]).batch)
            for pos, *_ in ready:  # a peer of the group could not load its media: not rolled out at all
                sums.add("data/media_failed", pos in own and str(pos) not in agreed)
            ready = [r for r in ready if str(r[0]) in agreed]
        rows_of = self.rollout.generate([req for _, _, req, _ in ready]) if ready else []
        groups = []
        for (pos, it, req, encoded), rows in zip(ready, rows_of):
            if pos not in own:  # a TP peer's prompt: rolled out together, trained and counted there
                continue
            if rows is None:
                sums.add("rollout/failed", 1)
                continue
            g = Group(it, req, make_responses(rows, self.tokenizer, self.rollout.ids), encoded=encoded)
            try:
                score(g, self.cfg.reward)
                mixed = mix_offline(g, r.offline_per_group, r.offline_accuracy_threshold, self.tokenizer,
                                    self.tokenizer.eos_token_id, r.max_tokens, self.cfg.reward)
            except ScorerUnavailable as exc:  # the answers were not checked: no reward to learn from, the run goes on
                log.warning("%s: not trained on (%s)", it.sample.key, exc)
                sums.add("reward/score_error", 1)
                continue
            if mixed:
                sums.add("rollout/offline", 1)
            sums.add("rollout/groups", 1)
            sums.add("prompt/tokens", len(encoded.input_ids) * len(g.responses))
            for resp in g.responses:
                penalty = algos.overlong_penalty(len(resp.token_ids), r.max_tokens, a.overlong_buffer,
                                                 a.overlong_penalty)
                resp.reward += penalty
                sums.add("reward/overlong_sum", penalty)
                sums.add("rollout/responses", 1)
                sums.add("reward/sum", resp.reward)
                sums.add("reward/accuracy_sum", resp.accuracy)
                sums.add("reward/format_sum", resp.format)
                sums.add("response/tokens", len(resp.token_ids))
                sums.add("response/finished", resp.finished)
                if not resp.offline:
                    sums.add("rollout/online", 1)
                    sums.add("reward/online_sum", resp.reward)
            groups.append(g)
        return groups
