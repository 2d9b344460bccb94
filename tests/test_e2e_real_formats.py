"""Two real-format benchmarks (Video-MME and Charades-STA annotation files, as their users have them) on generated
stand-in videos, through `vbench-async run` with the tiny model on the real vLLM engine (the shared server), in one
run that reads one benchmark from each annotation source. Which source a benchmark is read from is decided per
benchmark, so one data root holds both; the golden tests check every benchmark in both sources without an engine."""

from __future__ import annotations

import json

import pytest
from conftest import SERVER_GROUP, run_cli, served_args
from support.videos import write_video
from test_benchmarks_golden import build_data_root, load_fixture

from vbench_async.benchmarks import get_benchmark

pytestmark = [pytest.mark.vllm, SERVER_GROUP]
SOURCES = {"videomme@32f": "unified", "charades_sta@32f": "hub"}
BENCHMARKS = tuple(SOURCES)


def test_real_format_benchmarks_end_to_end(vllm_server, tmp_path):
    root = tmp_path / "data"
    expected = {}
    for bench_id, source in SOURCES.items():
        bench = get_benchmark(bench_id)
        build_data_root(load_fixture(bench.card.base_id), source, root)
        samples = bench.load_samples(root, source=source)
        expected[bench_id] = sorted(s.sample_id for s in samples)
        for s in samples:  # a stand-in video wherever a record points (16 s, so every span fits)
            path = bench.video_path(s, root)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_video(path, seconds=16, fps=25)
    assert {b: get_benchmark(b).resolve_source(root).kind for b in BENCHMARKS} == SOURCES
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", *served_args(vllm_server), "--benchmarks",
                   ",".join(BENCHMARKS), "--data-root", str(root), "--max-tokens", "12", "--max-pixels", "65536",
                   "--no-progress",
                   "--output-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for bench_id, ids in expected.items():
        b = summary["benchmarks"][bench_id]
        assert b["n_total"] == len(ids) and b["n_failed"] == 0 and b["complete"]
        lines = [json.loads(l) for l in (tmp_path / "run" / b["results_file"]).read_text().splitlines()]
        assert sorted(l["sample_id"] for l in lines) == ids
        assert all(l["prompt_tokens"] > 0 and l["output"] is not None for l in lines)
    # The official breakdowns are there: Video-MME by duration, Charades-STA recall at IoU thresholds.
    assert any("duration" in k for k in summary["benchmarks"]["videomme@32f"])
    assert "R@0.5" in json.dumps(summary["benchmarks"]["charades_sta@32f"])
