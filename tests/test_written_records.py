"""The project's own files read back through the declarations that write them: the judge's register and verdict
lines (results/verdict_record.py), the shard plan and index (results/shard_records.py), the site's strip memo
(leaderboard/thumbnails.py) and a result line's frames record (sample_result.FramesSeen). A file written and read
back is the same; a damaged one is one clear error, or is ignored where a reader always ignored it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vbench_async.errors import UserError
from vbench_async.evaluation.judge_outcome import JudgeFailure, JudgePass
from vbench_async.leaderboard.thumbnails import FROM_CACHE, MEMO, StripMemo, load_memo
from vbench_async.record_io import RecordError
from vbench_async.results.merge import MergeRefused, find_shard_sets
from vbench_async.results.result_config import ResultConfig
from vbench_async.results.rundir import shard_index_path
from vbench_async.results.verdict_record import Verdict
from vbench_async.results.verdicts import JudgeIdentity, activate_judge, active_judge, read_state
from vbench_async.sample_result import FramesSeen
from vbench_async.sharding import Shard, ShardPlan, ShardSelection


def _identity(model: str) -> JudgeIdentity:
    return JudgeIdentity(model=model, fingerprint=model * 16, backend="vllm", sampling={"temperature": 0.0},
                         prompt_hash="p" * 16)


def test_the_judge_register_keeps_every_judge_and_the_active_one(tmp_path: Path) -> None:
    first, second = _identity("a"), _identity("b")
    activate_judge(tmp_path, first)
    activate_judge(tmp_path, second)
    state = read_state(tmp_path)
    assert list(state.judges) == [first.key, second.key] and state.active == second.key
    active = active_judge(tmp_path)
    assert active is not None and active.model == "b" and active.judge_id == second.judge_id
    assert active.sampling == {"temperature": 0.0} and active.created_at and active.updated_at
    activate_judge(tmp_path, first)  # back to the first: its entry is kept, not made again
    again = read_state(tmp_path)
    assert again.active == first.key and again.judges[first.key].created_at == state.judges[first.key].created_at
    path = tmp_path / "judge" / "judge.json"
    assert json.loads(path.read_text()) == again.to_json()
    assert list(json.loads(path.read_text())["judges"][first.key]) == [  # the keys in the order always written
        "model", "fingerprint", "backend", "sampling", "prompt_hash", "judge_id", "key", "created_at", "updated_at"]


@pytest.mark.parametrize("text", ["{not json", "[]", '{"active": 3, "judges": {}}', '{"judges": {"k": []}}'])
def test_a_damaged_judge_register_is_one_clear_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "judge.json").write_text(text)
    with pytest.raises(UserError, match="judge.json.*delete it and judge the run again"):
        active_judge(tmp_path)


def test_a_verdict_line_reads_back_as_written_and_a_hand_edited_field_as_absent() -> None:
    written = Verdict(sample_id="s", benchmark="vcrbench", judge_id="j@1", protocol="vcrbench", prompt_hash="p",
                      answer_hash="h", steps=[{"stage": "judge", "output": "zq"}], output="zq", score=None,
                      error={"kind": "judge_unparsable", "message": "no verdict"}, info={"reply": "zq xv"})
    assert Verdict.read(json.loads(json.dumps(written.to_json()))) == written
    assert list(written.to_json())[:6] == ["sample_id", "benchmark", "judge_id", "protocol", "prompt_hash",
                                           "answer_hash"]
    edited = Verdict.read({**written.to_json(), "protocol": 5, "info": ["x"], "benchmark": None})
    assert edited.protocol is None and edited.info == {} and edited.benchmark is None
    failure = JudgeFailure.of(edited, benchmark="from-the-summary")
    assert failure == JudgeFailure("from-the-summary", "s", "judge_unparsable", "no verdict", "zq")
    assert JudgeFailure.of(written).reply == "zq xv"  # the reply the protocol could not read, when it names one
    counts = JudgePass(n_judged=1, n_skipped=2, n_skipped_failed=1, earlier_failures=[failure], judge_id="j", key="k")
    assert counts.n_waiting == 3 and counts.n_usable == 2
    assert counts.to_json()["earlier_failures"][0]["kind"] == "judge_unparsable"


def test_a_shard_plan_reads_back_and_a_damaged_one_is_one_clear_error() -> None:
    plan = ShardPlan(2, {"a": 0, "b": 1}, {"a": 3, "b": 4}, "key", {"videos": 2})
    assert ShardPlan.from_json(plan.to_json()) == plan
    data = json.loads(plan.to_json())
    assert list(data) == ["format", "key", "count", "loads", "estimate", "units"] and data["loads"] == [3, 4]
    for damaged in ({**data, "format": 2}, {**data, "units": {"a": [0]}}, {**data, "units": ["a"]}, [data]):
        with pytest.raises(RecordError, match="plan-x.json"):
            ShardPlan.from_json(json.dumps(damaged), "plan-x.json")


def test_a_damaged_shard_index_is_one_clear_error(tmp_path: Path) -> None:
    plan = ShardPlan(2, {"a": 0, "b": 1}, {"a": 3, "b": 4}, "key")
    groups = {(b, s): u for b in ("x", "y") for s, u in (("s1", "a"), ("s2", "b"))}
    selection = ShardSelection(Shard(0, 2), plan, groups)
    config = ResultConfig(model="m", benchmark="x")
    path = selection.write_index(tmp_path, "x", "abc", config, ["s1", "s2"])
    index = json.loads(path.read_text())
    assert index["sample_ids"] == ["s1", "s2"] and index["shards"] == [0, 1] and index["plan"] == "key"
    assert selection.write_index(tmp_path, "x", "abc", config, ["s1", "s2"]) == path  # the same split: accepted
    (read,) = find_shard_sets(tmp_path)  # merge reads what the shards wrote
    assert (read.benchmark, read.sample_ids, read.owners, read.config) == ("x", ("s1", "s2"), (0, 1), config)
    for bad, why in (({k: v for k, v in index.items() if k != "shards"}, "has no shards"),
                     ({**index, "shards": [0]}, "2 ids but 1 shard numbers"), ({**index, "count": "2"}, "count")):
        path.write_text(json.dumps(bad))
        with pytest.raises(MergeRefused, match=f"not a readable shard index .*{why}"):
            find_shard_sets(tmp_path)
    path.write_text(json.dumps(index))
    damaged = shard_index_path(tmp_path, "y", "abc", 2)
    damaged.write_text(json.dumps({**index, "benchmark": "y", "sample_ids": "s1"}))
    with pytest.raises(UserError, match=r"sample_ids.*not a list.*start the shards again"):
        selection.write_index(tmp_path, "y", "abc", {"k": 1}, ["s1", "s2"])


def test_the_strip_memo_reads_back_without_the_entries_that_are_not_ours(tmp_path: Path) -> None:
    memo = StripMemo({"k:1,2": (FROM_CACHE, ["0123456789abcdef0123.jpg"])})
    (tmp_path / MEMO).write_text(json.dumps(memo.to_json()))
    assert load_memo(tmp_path) == memo
    data = memo.to_json()
    data["strips"].update({"bad-origin": ["elsewhere", []], "bad-name": [FROM_CACHE, ["../x.jpg"]], "short": [1]})
    assert StripMemo.from_json(data) == memo
    assert StripMemo.from_json({**data, "version": "other"}) == StripMemo() == StripMemo.from_json([data])
    (tmp_path / MEMO).write_text("[" * 100_000)  # nested past the parser's depth: no memo, no crash
    assert load_memo(tmp_path) == StripMemo()


def test_a_frames_record_no_reader_can_trust_reads_as_none() -> None:
    whole = {"n": 2, "indices": [0, 5], "timestamps": [0.0, 0.5], "size": [28, 28], "source_size": [56, 56],
             "fps": 10, "duration": 1.0, "cache_key": "k", "source": "/v.mp4"}
    seen = FramesSeen.read(whole)
    assert seen is not None and seen.n == 2 and seen.source == "/v.mp4" and seen.window is None
    for damaged in ({k: v for k, v in whole.items() if k != "cache_key"}, {**whole, "n": True},
                    {**whole, "indices": "0,5"}, {**whole, "source": 3}, [whole], None):
        assert FramesSeen.read(damaged) is None
