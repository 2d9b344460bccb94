"""summary.json and manifest.json read as declared records (results/summary_record.py, manifest_record.py): a file
written and read back keeps its shape, an older file's missing fields take defaults, a damaged one is one error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vbench_async.errors import UserError
from vbench_async.record_io import RecordError
from vbench_async.results.manifest_record import read_manifest_file
from vbench_async.results.summary_record import BenchmarkSummary, RunStats, Summary, read_summary_file

BLOCK = {"score": 0.5, "metric": "accuracy", "n_total": 4, "n_scored": 4, "n_failed": 0, "n_pending": 0,
         "headline": "mean over all samples", "by_category": {"a": {"score": 0.5, "n": 4}}, "reading": "official",
         "chance": None, "interval": {"low": 0.1, "high": 0.9, "se": 0.2, "level": 0.95, "n_clusters": 4},
         "n_expected": 4, "complete": True, "status": "complete", "results_file": "results/x.jsonl",
         "config_hash": "abc"}


def test_a_summary_written_and_read_back_is_the_same(tmp_path: Path) -> None:
    summary = Summary(model="m", family="f", complete=True, status="complete",
                      benchmarks={"x": BenchmarkSummary.of(BLOCK)}, run=RunStats(startup_s=1.5), wall_s=2.0)
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary.to_json()))
    read = read_summary_file(path)
    assert read.to_json() == summary.to_json()
    assert json.dumps(read.to_json()) == path.read_text()  # the keys in their order too
    block = read.benchmarks["x"]
    assert block.interval is not None and block.interval.low == 0.1 and block.extra["by_category"]["a"]["n"] == 4
    assert block.chance_recorded and block.chance is None and read.run.startup_s == 1.5


def test_an_older_summary_without_later_fields_reads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"model": "old", "benchmarks": {"x": {"score": 0.25, "n_total": 2}}}))
    read = read_summary_file(path)
    block = read.benchmarks["x"]
    assert (block.n_failed, block.robust, block.subset, block.stale_ids) == (0, None, None, [])
    assert not block.chance_recorded and read.run.startup_s is None and not read.random_weights
    assert read.to_json() == json.loads(path.read_text())  # nothing added on the way back


@pytest.mark.parametrize("text", ["{not json", "[]", '{"benchmarks": {"x": [1]}}',
                                  '{"benchmarks": {"x": {"n_total": "many"}}}', '{"model": "m"}'])
def test_a_damaged_summary_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "summary.json"
    path.write_text(text)
    with pytest.raises(RecordError, match="summary.json") as caught:
        read_summary_file(path)
    assert isinstance(caught.value, UserError)


def test_a_manifest_round_trips_and_a_damaged_one_is_one_clear_error(tmp_path: Path) -> None:
    manifest = {"manifest_version": 2, "model": {"name": "m", "path": "/m", "parameters": 7, "revision": None},
                "benchmarks": {"x": {"config": {"frames": {"max_frames": 8}}, "config_hash": "abc"}},
                "hardware": {"cpus": 2, "gpus": [{"name": "H200", "memory_bytes": 1}]}, "judge": None,
                "something_newer": {"kept": True}}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    read = read_manifest_file(path)
    assert read.model.parameters == 7 and read.benchmarks["x"].config.to_json() == {"frames": {"max_frames": 8}}
    assert read.run_config.cache_dir is None and read.command == []  # absent in this older file
    assert json.dumps(read.to_json()) == json.dumps(manifest)
    path.write_text(json.dumps({**manifest, "hardware": {"gpus": "H200"}}))
    with pytest.raises(RecordError, match=r"manifest.json.*hardware\.gpus"):
        read_manifest_file(path)


def test_a_fresh_records_required_keys_are_written_at_their_default():
    # Shard 0's summary says index 0 (a dropped default there read as "no shard index" and broke the shard check).
    from vbench_async.results.summary_record import ShardInfo

    assert ShardInfo(index=0, count=2).to_json() == {"index": 0, "count": 2}


def test_the_recorded_frames_and_sampling_declare_exactly_the_fields_the_run_writes() -> None:
    """`RecordedFrames` and `RecordedSampling` are the lenient read-back forms of `FrameSpec` and `SamplingParams` (a
    recorded spec is read as written, never rebuilt through `FrameSpec`'s family checks): they must not drift from
    the declarations they mirror."""
    import dataclasses

    from vbench_async.backends.base import SamplingParams
    from vbench_async.frames.spec import FrameSpec
    from vbench_async.results.result_config import RecordedFrames, RecordedSampling

    def names(cls: type) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.metadata.get("json", True)]

    assert names(RecordedFrames) == names(FrameSpec)
    assert names(RecordedSampling) == names(SamplingParams)
