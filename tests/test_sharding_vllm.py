"""Acceptance: two shards run at once (torchrun, two processes) into one directory, the last one merges, and the
merged results are exactly those of an unsharded run.

The unsharded reference is the shared `qwen25_runs` fixture (same model, suite and flags, the in-process engine); its
frame cache is reused. The two shard processes send their requests to the shared vLLM server (`vllm_server`, the same
engine behind HTTP), so this test pays no engine start-up of its own; greedy outputs must still match exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import DEMO_ARGS, ENGINE_GROUP, REPO, demo_ids, run_cli, served_args, wait_for_site

from vbench_async.results.lines import read_lines

pytestmark = [pytest.mark.vllm, ENGINE_GROUP]

COMPARED = ("output", "score", "extracted", "well_formed", "error", "prompt_tokens", "output_tokens", "prompt")


@pytest.fixture(scope="module")
def runs(qwen25_runs, vllm_server, tmp_path_factory):
    tmp, first, _ = qwen25_runs
    assert first.returncode == 0, first.stderr[-4000:]
    sharded = tmp_path_factory.mktemp("sharded") / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "VBENCH_ASYNC_SHARD")}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "vbench_async", "run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, *served_args(vllm_server),
         "--output-dir", str(sharded), "--cache-dir", str(tmp / "cache"), "--shard", "auto"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return tmp / "a", sharded, proc


def result_file(run_dir: Path, bench: str) -> Path:
    (path,) = [p for p in (run_dir / "results").glob(f"{bench}.*.jsonl") if ".shard-" not in p.name]
    return path


def test_merged_shards_equal_the_unsharded_run(runs):
    plain, sharded, proc = runs
    # The last shard to finish merges; when both finish together both may merge (the same files, under a lock).
    assert "all shards done, merged into summary.json" in proc.stdout
    configs = [json.loads((d / "manifest.json").read_text())["benchmarks"] for d in (plain, sharded)]
    for bench, ids in demo_ids().items():
        a, b = result_file(plain, bench), result_file(sharded, bench)
        # Sharding is not part of the config; the serving path is (the shards sent their requests to a server).
        ca, cb = (dict(c[bench]["config"]) for c in configs)
        assert (ca.pop("backend"), cb.pop("backend")) == ("vllm", "openai") and ca == cb
        ra, rb = read_lines(a), read_lines(b)
        assert list(rb) == ids  # merged in annotation order, each sample once
        for sid in ids:
            assert {k: ra[sid].get(k) for k in COMPARED} == {k: rb[sid].get(k) for k in COMPARED}, (bench, sid)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (plain, sharded))
    assert sb["complete"] is True and sb["merged"]["shards"] == ["0/2", "1/2"]
    drop = ("results_file", "judge", "config_hash")
    assert {k: {f: v for f, v in blk.items() if f not in drop} for k, blk in sa["benchmarks"].items()} == \
        {k: {f: v for f, v in blk.items() if f not in drop} for k, blk in sb["benchmarks"].items()}
    manifest = json.loads((sharded / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["0/2", "1/2"]
    assert wait_for_site(sharded).exists()


def test_each_shard_evaluated_its_own_videos(runs):
    _, sharded, _ = runs
    shard_of_video: dict[str, set[int]] = defaultdict(set)
    per_shard = []
    for k in range(2):
        summary = json.loads((sharded / f"summary.shard-{k}-of-2.json").read_text())
        assert summary["shard"] == {"index": k, "count": 2} and summary["complete"]
        per_shard.append(sum(b["n_total"] for b in summary["benchmarks"].values()))
        for f in (sharded / "results").glob(f"*.shard-{k}-of-2.jsonl"):
            for r in read_lines(f).values():
                shard_of_video[r["video"]].add(k)
    assert sum(per_shard) == sum(len(v) for v in demo_ids().values()) and min(per_shard) > 0
    assert all(len(shards) == 1 for shards in shard_of_video.values())  # a video's questions stay together
    assert {k for s in shard_of_video.values() for k in s} == {0, 1}


def test_rerunning_a_finished_shard_changes_nothing(runs, vllm_server):
    plain, sharded, _ = runs
    before = {p.name: p.read_bytes() for p in (sharded / "results").glob("*.jsonl")}
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, *served_args(vllm_server), "--output-dir",
                   str(sharded), "--shard", "1/2", "--no-site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "all shards done, merged into summary.json" in proc.stdout  # nothing to evaluate: merged again at once
    assert {p.name: p.read_bytes() for p in (sharded / "results").glob("*.jsonl")} == before
