"""Files the project writes for itself, declared as records (issue #38): a file in the format written before the
declarations reads and is written back byte for byte, and a damaged one is refused as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from vbench_async.errors import UserError
from vbench_async.frames.decode_job import DecodeJob, DecodeReply
from vbench_async.frames.keys import FingerprintMemo, FingerprintRecord, read_record
from vbench_async.serve.jobs import JobRecord
from vbench_async.train.headers import HeadersRecord
from vbench_async.train.logger import StepLine
from vbench_async.train.trainer_state import FORMAT, STATE_FILE, ExportInfo, TrainerState, read_state
from vbench_async.workload.memo import MEMO_VERSION, MemoFile

# As the writers before the declarations wrote them (json.dumps of a dict literal).
STATE = json.dumps({"step": 3, "consumed": 24, "config_hash": "ab12", "config": {"train": {"lr": 1e-6}},
                    "world_size": 2, "model": "tiny", "format": FORMAT}, indent=1)
HEADERS = json.dumps({"format": 1, "videos": {"a.mp4": {"stamp": [10, 99], "probe": [30.0, 90]},
                                              "b.mp4": {"stamp": [11, 98], "probe": None}}})
MEMO = json.dumps({"version": MEMO_VERSION, "tables": {"rule": {"image_id": 151655}, "frame": {"1,0": None}}})
METRICS = json.dumps({"step": 2, "time": 1700000000.125, "loss": 0.5, "reward/mean": None})
JOB = json.dumps({"id": "0123abcd", "status": "running", "spec": {"selection": {"suite": "demo"}},
                  "submitted_at": 1.5, "started_at": 2.5, "finished_at": None, "wall_s": 1.0, "run_dir": "/r",
                  "progress": {"done": 3, "total": 9}, "summary": None, "site": None, "error": None})


@pytest.mark.parametrize("record, text", [(TrainerState, STATE), (HeadersRecord, HEADERS), (MemoFile, MEMO),
                                          (StepLine, METRICS), (JobRecord, JOB)],
                         ids=["trainer_state", "headers", "memo", "metrics", "job"])
def test_a_file_written_before_its_declaration_reads_and_writes_back_unchanged(record: Any, text: str) -> None:
    indent = 1 if record is TrainerState else None
    assert json.dumps(record.from_json(json.loads(text)).to_json(), indent=indent) == text


def test_the_writers_fresh_records_write_the_same_bytes_as_before() -> None:
    state = TrainerState(step=3, consumed=24, config_hash="ab12", config={"train": {"lr": 1e-6}}, world_size=2,
                         model="tiny", format=FORMAT)
    assert json.dumps(state.to_json(), indent=1) == STATE
    assert json.dumps(StepLine(step=2, time=1700000000.125, extra={"loss": 0.5, "reward/mean": None}).to_json()) \
        == METRICS
    assert json.dumps(ExportInfo(step=5, config_hash="ab12", base_model="tiny").to_json()) == \
        json.dumps({"step": 5, "config_hash": "ab12", "base_model": "tiny"})  # the trainer's export
    assert list(ExportInfo(step=5, config_hash=None, base_model="tiny", checkpoint="/c").to_json()) == \
        ["step", "config_hash", "base_model", "checkpoint"]  # an export of a checkpoint directory
    job = JobRecord.from_json(json.loads(JOB))
    assert json.dumps(replace(job, keys=()).to_json()) == JOB  # every key written, in the same order


def test_a_checkpoint_state_of_the_wrong_shape_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"step": "three", "format": FORMAT}))
    with pytest.raises(UserError, match=r"step: str 'three' is not a int"):
        read_state(tmp_path)
    (tmp_path / STATE_FILE).write_text(json.dumps({"step": 3}))
    with pytest.raises(UserError, match="older format"):
        read_state(tmp_path)
    (tmp_path / STATE_FILE).write_text(json.dumps({"step": 3, "format": FORMAT}))
    assert read_state(tmp_path).consumed == 0 and read_state(tmp_path).config is None


def test_a_damaged_header_entry_costs_only_its_video_a_probe() -> None:
    stored = HeadersRecord.from_json({"format": 1, "videos": {"a.mp4": {"stamp": [10, 99], "probe": [30.0, 90]},
                                                              "b.mp4": {"stamp": "yesterday", "probe": None}}})
    entry = stored.entry("a.mp4")
    assert entry is not None and entry.stamp == [10, 99] and entry.header == (30.0, 90)
    assert stored.entry("b.mp4") is None and stored.entry("c.mp4") is None


def test_a_fingerprint_record_is_used_only_whole_and_unchanged(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"\0" * 1000)
    store = tmp_path / "fingerprints"
    digest = FingerprintMemo(store=store)(video)
    [path] = store.rglob("*.json")
    record = read_record(path)
    assert record is not None and record.digest == digest and record.path == str(video)
    data = json.loads(path.read_text())
    assert list(data) == ["path", "stamp", "mode", "digest", "check"]
    for damage in ({"digest": "0" * 40}, {"check": None}):
        path.write_text(json.dumps({**data, **damage}))
        assert read_record(path) is None
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "check"}))  # an earlier version's record
    assert read_record(path) is None
    assert FingerprintRecord.from_json(data).sound


def test_a_decode_job_and_its_reply_keep_their_fields() -> None:
    job = DecodeJob(id="k", video="/v.mp4", fingerprint="f", spec={"max_frames": 8}, window=[1.0, None],
                    decoder="pyav", codec="zstd", out="/e.safetensors")
    again = DecodeJob.from_json(json.loads(json.dumps(job.to_json())))
    assert [t.key for t in again.targets()] == ["k"] and again.window == [1.0, None] and again.codec == "zstd"
    failed = DecodeReply.from_json({"id": "k", "ok": False, "message": "boom", "pid": 7})
    assert (failed.ok, failed.kind, failed.message, failed.pid) == (False, "decode_error", "boom", 7)
