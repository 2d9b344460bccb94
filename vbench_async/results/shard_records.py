"""A sharded run's create-once files as declared records (written by `vbench_async/sharding.py`):

    RUN_DIR/shards/plan-<key>.json                         the pinned split (`PlanFile`)
    RUN_DIR/results/<benchmark>.<hash>.shards-<N>.json     every sample of a benchmark with its shard (`ShardIndex`)

Every field is written by every writer (`always`), so a fresh record's `to_json` is the file as it always was. How
they are read and written: `record_io.py` (a field of the wrong type is one RecordError naming the file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..record_io import OutputRecord, RecordError, always, read_record
from .result_config import ResultConfig

PLAN_FORMAT = 1  # both files' "format"


@dataclass
class PlanFile(OutputRecord):
    """The pinned split: each unit (one video's questions) with its shard and estimated cost."""

    format: int | None = always()
    key: str = always("")
    count: int = always(0)
    loads: list[int] = always(default_factory=list)  # each shard's estimated cost (for a reader; not read back)
    estimate: dict[str, Any] | None = always()  # how the costs were obtained (videos probed, seconds)
    units: dict[str, list[int]] = always(default_factory=dict)  # unit key -> [shard, cost]


@dataclass
class ShardIndex(OutputRecord):
    """A benchmark's samples in order, each with its shard: what `merge` checks the shards' result files against."""

    format: int | None = always()
    benchmark: str = always("")
    config_hash: str = always("")
    count: int = always(0)
    plan: str = always("")  # the plan's key
    config: ResultConfig = always(default_factory=ResultConfig)  # the benchmark's result config (what its hash covers)
    sample_ids: list[str] = always(default_factory=list)
    shards: list[int] = always(default_factory=list)  # the shard of each sample id, in the same order

    def same_split(self, other: ShardIndex) -> bool:
        return self.sample_ids == other.sample_ids and self.shards == other.shards


_INDEX_NEEDS = ("benchmark", "config_hash", "count", "sample_ids", "shards")  # what no index lacks: merge reads them


def read_shard_index(path: Path) -> ShardIndex:
    """A shard index file as the record; RecordError when it is unreadable, not JSON, lacks what merge reads, or a
    field has the wrong type (FileNotFoundError when there is none)."""
    index = read_record(ShardIndex, path)
    missing = [name for name in _INDEX_NEEDS if not index.has(name)]
    if missing:
        raise RecordError(f"{path} has no {', '.join(missing)}")
    if len(index.sample_ids) != len(index.shards):
        raise RecordError(f"{path} is damaged: {len(index.sample_ids)} ids but {len(index.shards)} shard numbers")
    return index
