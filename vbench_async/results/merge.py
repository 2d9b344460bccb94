"""`merge`: turn the shard files of a sharded run into exactly what an unsharded run writes.

Each shard K of N wrote `results/<benchmark>.<hash>.shard-K-of-N.jsonl`, and every shard recorded the benchmark's full
sample list with each sample's shard in `results/<benchmark>.<hash>.shards-N.json` (the index). Merging checks, per
benchmark, that all shards ran under one config hash and one split, and that every sample of the index has exactly
one result across the shard files; only then it writes `results/<benchmark>.<hash>.jsonl` (samples in annotation
order), `summary.json` and `manifest.json` (the shards' manifests combined). Anything wrong refuses the merge with
the ids at fault and writes nothing.
"""

from __future__ import annotations

import copy
import fcntl
import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, TypeVar

from ..errors import UserError
from ..record_io import OutputRecord, RecordError
from .lines import read_lines
from .manifest import iso, totals
from .manifest_record import BenchmarkManifest, Manifest
from .result_config import ResultConfig, differing, flat, shown
from .result_file import ResultStore, StoreLocked
from .rundir import (
    PLAN_DIRNAME,
    RESULTS_DIRNAME,
    ShardId,
    manifest_path,
    read_manifest,
    read_summary,
    summary_path,
    write_json,
)
from .shard_records import read_shard_index
from .summaries import records_subset, summarize_benchmark
from .summary_record import BenchmarkSummary, MergeInfo, RunStats, Summary

log = logging.getLogger(__name__)

SHOWN_IDS = 20  # ids listed per problem; the rest are counted


class MergeRefused(UserError):
    """The shards cannot be merged as they are; the message lists every problem."""


@dataclass(frozen=True)
class ShardSet:
    """The shards of one benchmark under one config: N shard files and the index they were planned with."""

    run_dir: Path
    benchmark: str
    config_hash: str
    count: int
    index_path: Path
    sample_ids: tuple[str, ...]
    owners: tuple[int, ...]  # shard of each sample id
    config: ResultConfig = field(default_factory=ResultConfig)

    def store(self, shard: int | None = None) -> ResultStore:
        return ResultStore(self.run_dir, self.benchmark, self.config_hash, (shard, self.count) if shard is not None
                           else None)


@dataclass
class MergeCheck:
    """What the shard files of one ShardSet hold, measured against its index."""

    shard_set: ShardSet
    results: list[dict[str, Any]]  # one per sample, in index order (only those found)
    missing: dict[int, list[str]]  # shard -> ids it should have and nobody has
    duplicated: dict[str, list[int]]  # id -> the shards holding it
    unexpected: dict[int, list[str]]  # shard -> ids not in the index
    absent: list[int]  # shards with samples and no results file (never started?)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected)

    def problems(self) -> list[str]:
        s = self.shard_set
        where = f"{s.benchmark} (config {s.config_hash}, {s.count} shards)"
        out = []
        for shard, ids in sorted(self.missing.items()):
            note = " (no results file: not started?)" if shard in self.absent else ""
            out.append(f"{where}: {len(ids)} sample(s) of shard {shard}/{s.count} missing{note}: {_ids(ids)}")
        if self.duplicated:
            ids = sorted(self.duplicated)
            shown = ", ".join(f"{i} (shards {'+'.join(map(str, self.duplicated[i]))})" for i in ids[:SHOWN_IDS])
            more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
            out.append(f"{where}: {len(ids)} sample(s) duplicated across shards: {shown}{more}")
        for shard, ids in sorted(self.unexpected.items()):
            out.append(f"{where}: shard {shard}/{s.count} holds {len(ids)} sample(s) the index does not list: "
                       f"{_ids(ids)}")
        return out

    def progress(self) -> str:
        s = self.shard_set
        return f"{s.benchmark}: {len(self.results) - len(self.duplicated)} of {len(s.sample_ids)} samples done"


def find_shard_sets(run_dir: Path, config_hashes: Collection[str] | None = None) -> list[ShardSet]:
    """Every benchmark split of the run directory (optionally only those with the given config hashes)."""
    run_dir = Path(run_dir)
    sets = []
    for path in sorted((run_dir / RESULTS_DIRNAME).glob("[!.]*.shards-*.json")):
        try:
            index = read_shard_index(path)
        except (OSError, RecordError) as exc:
            raise MergeRefused(f"{path} is not a readable shard index ({exc}); re-run any shard to rewrite it") from exc
        s = ShardSet(run_dir, index.benchmark, index.config_hash, index.count, path, tuple(index.sample_ids),
                     tuple(index.shards), index.config)
        if config_hashes is None or s.config_hash in config_hashes:
            sets.append(s)
    return sets


def mixed(sets: list[ShardSet]) -> list[str]:
    """A benchmark split under more than one config or shard count: the shards were not started alike."""
    by_benchmark: dict[str, list[ShardSet]] = defaultdict(list)
    for s in sets:
        by_benchmark[s.benchmark].append(s)
    out = []
    for bench, group in sorted(by_benchmark.items()):
        if len(group) < 2:
            continue
        listed = "; ".join(f"config {s.config_hash} split {s.count} ways ({_present(s)})" for s in group)
        diff = _config_diff([s.config for s in group])
        out.append(f"{bench}: shards of different configs or splits: {listed}"
                   + (f"; they differ in {diff}" if diff else ""))
    return out


def check(s: ShardSet) -> MergeCheck:
    owner = dict(zip(s.sample_ids, s.owners))
    found: dict[str, dict[str, Any]] = {}
    holders: dict[str, list[int]] = defaultdict(list)
    unexpected: dict[int, list[str]] = {}
    absent = []
    for shard in range(s.count):
        path = s.store(shard).path
        if not path.exists():
            absent.append(shard)
            continue
        results = read_lines(path)  # the lines as written: the merged file holds them unchanged
        for sid, rec in results.items():
            holders[sid].append(shard)
            found.setdefault(sid, rec)
        extra = [sid for sid in results if sid not in owner]
        if extra:
            unexpected[shard] = extra
    missing: dict[int, list[str]] = defaultdict(list)
    for sid in s.sample_ids:
        if sid not in found:
            missing[owner[sid]].append(sid)
    duplicated = {sid: shards for sid, shards in holders.items() if len(shards) > 1}
    ordered = [found[sid] for sid in s.sample_ids if sid in found]
    return MergeCheck(s, ordered, dict(missing), duplicated, unexpected, [k for k in absent if k in missing])


def merge_run(run_dir: Path, config_hashes: Collection[str] | None = None) -> Summary:
    """Check and merge every split in `run_dir`; return the summary written to summary.json. MergeRefused if any
    check fails (nothing is written then)."""
    run_dir = Path(run_dir)
    sets = find_shard_sets(run_dir, config_hashes)
    if not sets:
        what = f" with config {', '.join(sorted(config_hashes))}" if config_hashes else ""
        raise MergeRefused(f"{run_dir} holds no sharded results{what} (no results/*.shards-N.json); "
                           "evaluate shards into it first")
    with _merge_lock(run_dir):
        checks = [check(s) for s in sets]
        problems = mixed(sets) + [p for c in checks for p in c.problems()]
        if problems:
            raise MergeRefused(f"cannot merge {run_dir}:\n  " + "\n  ".join(problems))
        return _write(run_dir, checks)


def merge_if_complete(run_dir: Path, configs: Mapping[str, str], count: int) -> bool:
    """Merge the run that just finished a shard when all its shards are done; False (and a log line) otherwise."""
    sets = [s for s in find_shard_sets(run_dir, set(configs.values()))
            if configs.get(s.benchmark) == s.config_hash and s.count == count]
    checks = [check(s) for s in sets]
    if len(sets) != len(configs) or not all(c.ok for c in checks):
        waiting = [c.progress() for c in checks if not c.ok]
        log.info("not merging %s yet (%s); the last shard to finish merges", run_dir,
                 "; ".join(waiting) or "some benchmarks have no shard index")
        return False
    with _merge_lock(run_dir):
        checks = [check(s) for s in sets]  # again, under the lock: another shard may have merged or rerun meanwhile
        if not all(c.ok for c in checks):
            return False
        try:
            _write(run_dir, checks)
        except MergeRefused as exc:
            log.warning("not merging: %s", exc)
            return False
    log.info("all %d shards are done: merged into %s", count, summary_path(run_dir))
    return True


# -- writing ---------------------------------------------------------------------------------------------------------
@dataclass
class ShardOutput:
    """One shard's own summary and manifest (None where a shard wrote none, e.g. it had no samples, or it is
    unreadable: the merged numbers come from the result files, these add only timing and provenance)."""

    shard: str  # "K/N"
    summary: Summary | None
    manifest: Manifest | None


def _write(run_dir: Path, checks: list[MergeCheck]) -> Summary:
    from ..benchmarks import get_benchmark

    shards = _shard_outputs(run_dir, sorted({c.shard_set.count for c in checks}))
    benchmarks: dict[str, BenchmarkSummary] = {}
    for c in checks:
        s = c.shard_set
        try:
            with s.store() as store:
                store.rewrite(c.results)
        except StoreLocked as exc:
            raise MergeRefused(f"{exc} (an unsharded run of the same config?); merge when it has finished") from exc
        # A --max-samples run stays a subset once merged (each shard's summary says so; the shard part is gone).
        subset = next((records_subset(b.subset) for sh in shards
                       if sh.summary is not None and (b := sh.summary.benchmarks.get(s.benchmark))), None)
        benchmarks[s.benchmark] = summarize_benchmark(run_dir, get_benchmark(s.benchmark), store.path,
                                                      s.config_hash, len(s.sample_ids), subset=subset)
    first = next((sh.summary for sh in shards if sh.summary is not None), None)
    summary = Summary(
        model=first.model if first is not None and first.has("model") else run_dir.name,
        family=first.family if first is not None else None,
        complete=all(b.complete for b in benchmarks.values()),
        benchmarks=benchmarks,
        run=RunStats(merged_from=[{"shard": sh.shard, "wall_s": sh.summary.wall_s if sh.summary else None,
                                   "run": sh.summary.run.to_json() if sh.summary and sh.summary.has("run")
                                   else None} for sh in shards]),
        wall_s=max(((sh.summary.wall_s or 0) if sh.summary else 0 for sh in shards), default=0),
        merged=MergeInfo(shards=[sh.shard for sh in shards], merged_at=iso(time.time())),
        random_weights=bool(first and first.random_weights),
    )
    write_json(summary_path(run_dir), summary.to_json())
    write_json(manifest_path(run_dir), _manifest(shards, benchmarks).to_json())
    return summary


def _shard_outputs(run_dir: Path, counts: list[int]) -> list[ShardOutput]:
    return [ShardOutput(f"{k}/{n}", _shard_output(read_summary, run_dir, (k, n)),
                        _shard_output(read_manifest, run_dir, (k, n)))
            for n in counts for k in range(n)]


_SHARD_KEYS = ("started_at", "finished_at", "duration_s", "command", "hardware", "versions", "git_commit",
               "environment", "throughput")


def _manifest(shards: list[ShardOutput], benchmarks: Mapping[str, BenchmarkSummary]) -> Manifest:
    """The shards' manifests as one: the first shard's, with merged result files and counts, and every shard's
    own timing, hardware, versions and command under "shards"."""
    manifests = [sh.manifest for sh in shards if sh.manifest is not None]
    merged = _copy(manifests[0]) if manifests else Manifest()
    per_benchmark = merged.benchmarks
    for bid, agg in benchmarks.items():
        entry = per_benchmark.get(bid) or next((_copy(m.benchmarks[bid]) for m in manifests if bid in m.benchmarks),
                                               BenchmarkManifest())
        block = agg.to_json()
        entry.results_file, entry.config_hash = agg.results_file, agg.config_hash
        entry.counts = {k: block[k] for k in ("n_expected", "n_total", "n_scored", "n_failed", "complete")
                        if k in block}
        per_benchmark[bid] = entry
    for bid in [b for b in per_benchmark if b not in benchmarks]:
        del per_benchmark[bid]
    merged.counts = totals(benchmarks)
    merged.shards = [_shard_provenance(sh) for sh in shards]
    if manifests:
        merged.started_at = min(m.started_at or "" for m in manifests) or None
        merged.finished_at = max(m.finished_at or "" for m in manifests) or None
        if len({json.dumps(m.versions, sort_keys=True) for m in manifests}) > 1:
            log.warning("the shards ran with different package versions (see manifest.json 'shards')")
    return merged


def _shard_provenance(sh: ShardOutput) -> dict[str, Any]:
    if sh.manifest is None:
        return {"shard": sh.shard, "manifest": None}
    written = sh.manifest.to_json()
    return {"shard": sh.shard, **{k: written[k] if k in written else None for k in _SHARD_KEYS}}


R = TypeVar("R", bound=OutputRecord)


def _copy(record: R) -> R:
    """A record to change without touching the one read (the merged manifest starts as the first shard's)."""
    return type(record).from_json(copy.deepcopy(record.to_json()))


class _merge_lock:
    """One merge at a time per run directory (two shards finishing together both try)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / PLAN_DIRNAME / ".merge.lock"

    def __enter__(self) -> _merge_lock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


def _shard_output(read: Callable[[Path, ShardId], R | None], run_dir: Path, shard: ShardId) -> R | None:
    """A shard's summary or manifest; None where it wrote none or it is unreadable."""
    try:
        return read(run_dir, shard)
    except UserError:
        return None


def _ids(ids: list[str]) -> str:
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return ", ".join(ids[:SHOWN_IDS]) + more


def _present(s: ShardSet) -> str:
    have = [k for k in range(s.count) if s.store(k).path.exists()]
    return f"shard files {', '.join(f'{k}/{s.count}' for k in have)}" if have else "no shard files yet"


def _config_diff(configs: list[ResultConfig]) -> str:
    """The config fields (dotted, one level deep) whose values differ between the configs."""
    flats = [flat(c.to_json()) for c in configs]
    return ", ".join(f"{k} ({' vs '.join(shown(f[k] if k in f else None) for f in flats)})"
                     for k in sorted(differing(flats)))
