"""End to end through `vbench-async run` in a subprocess, with the real vLLM AsyncLLM engine on CPU and tiny models."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import DEMO_ARGS, ENGINE_GROUP, demo_ids, outputs, run_cli, wait_for_site

from vbench_async.frames.layout import CacheLayout

pytestmark = pytest.mark.vllm


def assert_one_line_per_record(run_dir: Path, expected: dict[str, list[str]]) -> None:
    for bench, ids in expected.items():
        files = list((run_dir / "results").glob(f"{bench}.*.jsonl"))
        assert len(files) == 1, files
        lines = [json.loads(l) for l in files[0].read_text().splitlines()]
        counts = Counter(l["sample_id"] for l in lines)
        assert sorted(counts) == sorted(ids), bench
        assert set(counts.values()) == {1}, f"{bench}: duplicated lines {counts}"


@ENGINE_GROUP
def test_demo_run_writes_results_summary_and_site(qwen25_runs):
    tmp, first, _ = qwen25_runs
    assert first.returncode == 0, first.stderr[-4000:]
    run_dir = tmp / "a"
    assert_one_line_per_record(run_dir, demo_ids())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is True
    assert (run_dir / "manifest.json").exists()
    assert wait_for_site(run_dir).exists()  # built after the run's exit, by a process of its own
    for bench in demo_ids():
        b = summary["benchmarks"][bench]
        assert b["n_total"] == len(demo_ids()[bench])
        assert b["n_failed"] == 0, b
    assert "leaderboard:" in first.stdout


@ENGINE_GROUP
def test_shared_videos_are_decoded_once(qwen25_runs):
    tmp, _, second = qwen25_runs
    summary = json.loads((tmp / "a" / "summary.json").read_text())
    pre = summary["run"]["preprocess"]
    n_records = sum(len(v) for v in demo_ids().values())
    assert pre["jobs"] == n_records
    assert pre["unique"] < n_records  # several questions share a video
    # Under the cache budget preprocessing warms what fits; the rest is decoded by the loaders when its turn comes,
    # and nothing a queued request still needs is evicted (so no video is decoded twice). Every sample is scored
    # (test above) with the outputs of the unbounded run (test_greedy_runs_are_identical).
    # (reused: a loader, loading while the engine starts, decoded the video before the pass reached it)
    assert pre["cached"] + pre["reused"] + pre["deferred"] == pre["unique"] and pre["deferred"] > 0
    assert 0 < len(list(CacheLayout(tmp / "cache").entries())) < pre["unique"]  # entries were evicted
    # The loaders filled the queue while the engine started (on this cold cache, beside the preprocessing pass).
    assert summary["run"]["loop"]["queued_at_ready"] > 0
    # Every pending request was in flight at once: the frames of the demo's videos fit in memory many times over.
    manifest = json.loads((tmp / "a" / "manifest.json").read_text())
    assert manifest["run_config"]["concurrency"] == sum(len(v) for v in demo_ids().values())
    # The second run (its last start: tests/support/interruptions.py) finds every video cached and decodes nothing.
    second_summary = json.loads((tmp / "b" / "summary.json").read_text())
    assert second_summary["run"]["mode"] == "eval"
    assert "preprocess" not in second_summary["run"]


@ENGINE_GROUP
def test_greedy_runs_are_identical(qwen25_runs):
    tmp, _, _ = qwen25_runs
    a, b = outputs(tmp / "a"), outputs(tmp / "b")
    assert a and a == b


@ENGINE_GROUP
def test_rerun_resumes_with_nothing_to_do(qwen25_runs):
    tmp, _, _ = qwen25_runs
    before = {f.name: f.read_bytes() for f in (tmp / "a" / "results").glob("*.jsonl")}
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(tmp / "a"),
                   "--cache-dir", str(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = {f.name: f.read_bytes() for f in (tmp / "a" / "results").glob("*.jsonl")}
    assert before == after


# The first 3 samples of each demo benchmark: every benchmark and task type, 6 videos each shared by 3 benchmarks
# (the whole suite is the Qwen2.5-VL runs' job). Both under -m slow: the default suite runs Qwen3-VL through vLLM on
# every card's template (tests/test_real_layout.py), on the seeing suite with real frames (tests/test_seeing_model.py)
# and on its timestamps (tests/test_frames_vllm.py).
QWEN3_SAMPLES = 3


@pytest.mark.slow
@pytest.mark.parametrize("samples", [QWEN3_SAMPLES, None], ids=["first3", "whole"])
def test_qwen3_vl_demo_run(tmp_path, samples):
    limit = ("--max-samples", str(samples)) if samples else ()
    proc = run_cli("run", "--model", "tiny-qwen3-vl", *DEMO_ARGS, *limit, "--output-dir", str(tmp_path / "q3"),
                   "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    expected = {bench: ids[:samples] for bench, ids in demo_ids().items()}
    assert_one_line_per_record(tmp_path / "q3", expected)
    summary = json.loads((tmp_path / "q3" / "summary.json").read_text())
    assert summary["family"] == "qwen3-vl"
    assert all(b["n_failed"] == 0 for b in summary["benchmarks"].values())
    pre = summary["run"]["preprocess"]  # Qwen3-VL's frame spec differs from Qwen2.5-VL's: its own cache entries
    # Every distinct video in the cache: decoded by the pass, or by a loader first (they load while the engine starts,
    # and the pass then finds the entry); fewer than the jobs, since benchmarks share videos.
    assert pre["jobs"] == sum(len(v) for v in expected.values())
    assert pre["cached"] + pre["reused"] == pre["unique"] < pre["jobs"] and pre["failed"] == 0
