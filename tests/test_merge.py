"""Merging shards: the checks (mixed configs, missing / duplicated / unexpected ids) and what a merge writes.

The shard files are written with the real store and the real shard selection, as `run --shard` writes them; the
results themselves are made up here (the engine is exercised in test_sharding_vllm.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from vbench_async.benchmarks import get_benchmark, resolve_benchmarks
from vbench_async.models import family_ref
from vbench_async.results.lines import read_lines
from vbench_async.results.merge import MergeRefused, merge_if_complete, merge_run
from vbench_async.results.result_file import ResultStore, config_hash
from vbench_async.sharding import Shard, items_for, select

BENCHES = ("demo-mc", "demo-count")


def config_for(bench: str, max_tokens: int = 12) -> dict:
    return {"model": "tiny-fingerprint", "benchmark": bench, "sampling": {"max_tokens": max_tokens, "seed": 0}}


def result(sample, chash: str) -> dict:
    return {"sample_id": sample.sample_id, "benchmark": sample.benchmark, "config_hash": chash,
            "task_type": sample.task_type, "fields": dict(sample.fields), "output": f"answer to {sample.sample_id}",
            "score": float(len(sample.sample_id) % 2), "error": None}


def write_shards(run_dir: Path, count: int = 2, max_tokens: int = 12, skip: tuple[int, ...] = ()) -> dict:
    """A sharded run of two demo benchmarks as `run --shard K/N` leaves it; returns {bench: (hash, samples, sel)}.
    Shards in `skip` write their index but no results (they never got to run)."""
    loaded = [(b, b.load_samples(None)) for b in resolve_benchmarks(None, list(BENCHES))]
    qwen = family_ref("qwen2.5-vl")
    items = [it for b, samples in loaded for it in items_for(b, samples, b.frame_spec(qwen, {}), None)]
    out = {}
    for k in range(count):
        sel = select(Shard(k, count), items, run_dir)
        for b, samples in loaded:
            config = config_for(b.id, max_tokens)
            chash = config_hash(config)
            sel.write_index(run_dir, b.id, chash, config, [s.sample_id for s in samples])
            out[b.id] = (chash, samples, sel)
            if k in skip:
                continue
            with ResultStore(run_dir, b.id, chash, (k, count)) as store:
                for s in sel.keep(b.id, samples):
                    store.append(result(s, chash))
        manifest = {"benchmarks": {b.id: {"config": config_for(b.id, max_tokens)} for b, _ in loaded},
                    "started_at": f"2026-01-0{k + 1}T00:00:00+00:00", "finished_at": f"2026-01-0{k + 2}T00:00:00+00:00",
                    "versions": {"vllm": "0.32.0"}, "hardware": {"node": k}, "command": ["run", "--shard", f"{k}/2"]}
        (run_dir / f"manifest.shard-{k}-of-{count}.json").write_text(json.dumps(manifest))
        (run_dir / f"summary.shard-{k}-of-{count}.json").write_text(
            json.dumps({"model": "tiny", "family": "qwen2.5-vl", "wall_s": 10.0 + k, "run": {"samples": 1}}))
    return out


def shard_file(run_dir: Path, bench: str, chash: str, k: int, n: int = 2) -> Path:
    return ResultStore(run_dir, bench, chash, (k, n)).path


def drop_line(path: Path, sample_id: str) -> None:
    lines = [x for x in path.read_text().splitlines(keepends=True) if json.loads(x)["sample_id"] != sample_id]
    path.write_text("".join(lines))


def test_merge_writes_what_an_unsharded_run_writes(tmp_path):
    shards = write_shards(tmp_path)
    summary = merge_run(tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["benchmarks"] == summary.to_json()["benchmarks"] and on_disk["complete"] is True
    assert on_disk["merged"]["shards"] == ["0/2", "1/2"]
    for bench, (chash, samples, _) in shards.items():
        merged = tmp_path / "results" / f"{bench}.{chash}.jsonl"
        rows = [json.loads(x) for x in merged.read_text().splitlines()]
        assert [r["sample_id"] for r in rows] == [s.sample_id for s in samples]  # annotation order, once each
        assert rows == [result(s, chash) for s in samples]
        block = summary.benchmarks[bench]
        assert block.results_file == f"results/{bench}.{chash}.jsonl"
        assert block.n_expected == block.n_total == len(samples)
        assert block.score == pytest.approx(get_benchmark(bench).aggregate(rows)["score"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["0/2", "1/2"]
    assert [s["hardware"] for s in manifest["shards"]] == [{"node": 0}, {"node": 1}]
    assert manifest["started_at"] == "2026-01-01T00:00:00+00:00"
    assert manifest["finished_at"] == "2026-01-03T00:00:00+00:00"
    assert manifest["benchmarks"]["demo-mc"]["results_file"].endswith(f".{shards['demo-mc'][0]}.jsonl")
    assert manifest["counts"]["n_total"] == sum(len(s) for _, s, _ in shards.values())


def test_a_merged_max_samples_run_stays_a_subset(tmp_path):
    write_shards(tmp_path)
    for k in range(2):  # each shard's summary marks its --max-samples subset, as `run --shard k/2` writes it
        path = tmp_path / f"summary.shard-{k}-of-2.json"
        shard = json.loads(path.read_text())
        shard["benchmarks"] = {"demo-mc": {"subset": {"max_samples": 11, "n_available": 40, "shard": f"{k}/2",
                                                      "reason": "..."}}}
        path.write_text(json.dumps(shard))
    block = merge_run(tmp_path).to_json()["benchmarks"]
    assert block["demo-mc"]["subset"] == {"max_samples": 11, "n_available": 40,
                                          "reason": "the first 11 of 40 records (--max-samples 11)"}
    assert "subset" not in block["demo-count"]


def test_missing_samples_are_listed_with_their_shard(tmp_path):
    shards = write_shards(tmp_path)
    chash, samples, sel = shards["demo-mc"]
    lost = next(s.sample_id for s in samples if sel.owner("demo-mc", s.sample_id) == 1)
    drop_line(shard_file(tmp_path, "demo-mc", chash, 1), lost)
    with pytest.raises(MergeRefused) as err:
        merge_run(tmp_path)
    assert f"1 sample(s) of shard 1/2 missing: {lost}" in str(err.value)
    assert not (tmp_path / "summary.json").exists()
    assert not (tmp_path / "results" / f"demo-mc.{chash}.jsonl").exists()


def test_a_shard_that_never_ran_is_named(tmp_path):
    shards = write_shards(tmp_path, skip=(1,))
    chash, samples, sel = shards["demo-count"]
    missing = [s.sample_id for s in samples if sel.owner("demo-count", s.sample_id) == 1]
    with pytest.raises(MergeRefused) as err:
        merge_run(tmp_path)
    msg = str(err.value)
    assert f"{len(missing)} sample(s) of shard 1/2 missing (no results file: not started?)" in msg
    assert all(sid in msg for sid in missing[:5])


def test_duplicated_samples_are_listed_with_the_shards_holding_them(tmp_path):
    shards = write_shards(tmp_path)
    chash, samples, sel = shards["demo-mc"]
    twice = next(s for s in samples if sel.owner("demo-mc", s.sample_id) == 0)
    with ResultStore(tmp_path, "demo-mc", chash, (1, 2)) as store:
        store.append(result(twice, chash))
    expected = rf"1 sample\(s\) duplicated across shards: {twice.sample_id} \(shards 0\+1\)"
    with pytest.raises(MergeRefused, match=expected):
        merge_run(tmp_path)


def test_unexpected_samples_are_listed(tmp_path):
    shards = write_shards(tmp_path)
    chash, samples, _ = shards["demo-count"]
    with ResultStore(tmp_path, "demo-count", chash, (0, 2)) as store:
        store.append({**result(samples[0], chash), "sample_id": "not-in-the-annotations"})
    with pytest.raises(MergeRefused, match="shard 0/2 holds 1 sample.* index does not list: not-in-the-annotations"):
        merge_run(tmp_path)


def test_mixed_configs_are_refused_with_what_differs(tmp_path):
    first = write_shards(tmp_path, max_tokens=12)
    second = write_shards(tmp_path, max_tokens=16)  # a second run into the same directory, other settings
    h12, h16 = first["demo-mc"][0], second["demo-mc"][0]
    with pytest.raises(MergeRefused) as err:
        merge_run(tmp_path)
    msg = str(err.value)
    line = next(x for x in msg.splitlines() if "demo-mc: shards of different configs or splits" in x)
    assert f"config {h12} split 2 ways" in line and f"config {h16} split 2 ways" in line
    assert "they differ in sampling.max_tokens (" in line and line.count("max_tokens") == 1
    # choosing one config merges it
    summary = merge_run(tmp_path, config_hashes={h16, second["demo-count"][0]})
    assert summary.benchmarks["demo-mc"].config_hash == h16


def test_mixed_splits_are_refused(tmp_path):
    write_shards(tmp_path, count=2)
    write_shards(tmp_path, count=3)
    with pytest.raises(MergeRefused, match="split 2 ways .*split 3 ways"):
        merge_run(tmp_path)


def test_auto_merge_waits_for_the_last_shard(tmp_path):
    shards = write_shards(tmp_path)
    configs = {b: h for b, (h, _, _) in shards.items()}
    chash, samples, sel = shards["demo-mc"]
    path = shard_file(tmp_path, "demo-mc", chash, 0)
    kept = path.read_text()
    last = json.loads(kept.splitlines()[-1])["sample_id"]
    drop_line(path, last)  # shard 0 still busy with its last sample
    assert merge_if_complete(tmp_path, configs, 2) is False
    assert not (tmp_path / "summary.json").exists()
    path.write_text(kept)  # ... and now done
    assert merge_if_complete(tmp_path, configs, 2) is True
    merged = (tmp_path / "results" / f"demo-mc.{chash}.jsonl").read_bytes()
    assert merge_if_complete(tmp_path, configs, 2) is True  # again: same files
    assert (tmp_path / "results" / f"demo-mc.{chash}.jsonl").read_bytes() == merged
    assert len(read_lines(tmp_path / "results" / f"demo-mc.{chash}.jsonl")) == len(samples)


def test_merge_waits_for_a_writer_of_the_merged_file(tmp_path):
    shards = write_shards(tmp_path)
    chash = shards["demo-mc"][0]
    with ResultStore(tmp_path, "demo-mc", chash):  # an unsharded run of the same config is writing
        with pytest.raises(MergeRefused, match="being written by another process"):
            merge_run(tmp_path)


def test_merge_command(tmp_path):
    shards = write_shards(tmp_path)
    chash, samples, sel = shards["demo-count"]
    lost = next(s.sample_id for s in samples if sel.owner("demo-count", s.sample_id) == 0)
    path = shard_file(tmp_path, "demo-count", chash, 0)
    kept = path.read_text()
    drop_line(path, lost)
    refused = run_cli("merge", str(tmp_path))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"vbench-async: error: cannot merge {tmp_path}" in refused.stderr and lost in refused.stderr
    path.write_text(kept)
    done = run_cli("merge", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "merged shards 0/2, 1/2" in done.stdout and "demo-count" in done.stdout
    assert (tmp_path / "leaderboard" / "index.html").exists()
    empty = run_cli("merge", str(tmp_path / "results"))
    assert empty.returncode == 2 and "holds no sharded results" in empty.stderr
