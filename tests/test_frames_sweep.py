"""Frame-budget sweeps: one decode pass over a video fills the cache entries of every budget, each entry equal to the
one a single-budget decode writes, and `run --max-frames A,B --mode preprocess` fills them from the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SERVER_GROUP, run_cli, served_args, wait_for_site
from support.videos import frame_index, write_video

from vbench_async.cli.run_options import frame_budgets
from vbench_async.frames import FrameCache, FrameSpec, VideoJob, preprocess
from vbench_async.frames.decode_video import decode_video, decode_video_specs

SMALL = dict(min_pixels=4 * 1024, max_pixels=32 * 1024)
BUDGETS = [FrameSpec("qwen3-vl", max_frames=n, **SMALL) for n in (4, 8, 16)]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("sweep-clips")
    return [write_video(d / f"c{i}.mp4", frames=300 + 30 * i, fps=30) for i in range(2)]  # 10 s: 20 frames at 2 fps


def test_one_pass_gives_every_budget_exactly_its_own_frames(clips):
    together = decode_video_specs(clips[0], BUDGETS)
    assert [m.num_frames for _, m in together] == [4, 8, 16]
    for _spec, (frames, meta) in zip(BUDGETS, together, strict=True):
        assert [frame_index(f) for f in frames] == list(meta.frames_indices)
    alone, alone_meta = decode_video(clips[0], BUDGETS[-1])  # the single-spec path gives the same entry
    assert np.array_equal(together[-1][0], alone) and together[-1][1].frames_indices == alone_meta.frames_indices
    assert together[-1][1].spec == alone_meta.spec


def test_preprocess_opens_each_video_once_for_all_budgets(clips, tmp_path):
    jobs = [VideoJob(video=c, spec=s) for c in clips for s in BUDGETS]
    with FrameCache(tmp_path / "cache", workers=2) as cache:
        report = preprocess(jobs, cache, workers=2, progress=False)
        assert (report.cached, report.passes, report.failed) == (6, 2, 0)
        assert cache.decodes == 2  # one worker job per video, not per budget
        for c in clips:
            for spec in BUDGETS:
                hit = cache.get(c, spec)
                assert hit is not None and [frame_index(f) for f in hit.frames] == list(hit.meta.frames_indices)
                assert hit.meta.num_frames == spec.max_frames
        again = preprocess(jobs, cache, workers=2, progress=False)
        assert (again.cached, again.reused, again.passes, cache.decodes) == (0, 6, 0, 2)


@pytest.mark.slow  # a CLI process and decode workers (~10 s); the library path above is the default check
def test_run_sweep_in_preprocess_mode_fills_every_budget(tmp_path):
    cache = tmp_path / "cache"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-samples", "3",
                   "--max-frames", "4,8", "--mode", "preprocess", "--no-progress", "--output-dir",
                   str(tmp_path / "out"), "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("frames for 2 budgets"))
    entries = int(line.split(": ")[1].split()[0])
    passes = int(line.split(" in ")[1].split()[0])
    assert passes * 2 == entries and passes >= 1  # each video: one pass, two entries
    assert len(list(cache.rglob("*.safetensors"))) == entries


@pytest.mark.parametrize("bad", ["0", "8,-1", "8,x", ""])
def test_bad_budgets_are_refused_at_parse_time(bad):
    with pytest.raises(argparse.ArgumentTypeError):
        frame_budgets(bad)
    assert frame_budgets("16, 32,64") == (16, 32, 64) and frame_budgets("8") == (8,)


def test_a_budget_listed_twice_is_refused(tmp_path):
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-frames", "8,8",
                   "--output-dir", str(tmp_path / "out"), "--mode", "preprocess")
    assert proc.returncode != 0 and "twice" in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow  # an engine start (transformers backend, tiny model) and two runs: about a minute of CPU
def test_a_sweep_runs_every_budget_into_its_own_run_directory(tmp_path):
    out = tmp_path / "sweep"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--backend", "hf", "--benchmarks", "demo-mc",
                   "--max-samples", "3", "--max-tokens", "4", "--max-frames", "4,8", "--no-progress",
                   "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache"), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for budget in (4, 8):
        run = out / f"max_frames-{budget}"
        summary = json.loads((run / "summary.json").read_text())
        assert summary["complete"] and summary["benchmarks"]["demo-mc"]["n_total"] == 3
        lines = [json.loads(x) for f in (run / "results").glob("*.jsonl") for x in f.read_text().splitlines()]
        assert len(lines) == 3 and max(x["frames"]["n"] for x in lines) == budget
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["benchmarks"]["demo-mc"]["frames"]["max_frames"] == budget
        assert manifest["backend"]["engine_starts"] == 1  # one model load for both budgets
    assert "frames for 2 budgets" in proc.stdout and "max_frames=8:" in proc.stdout
    wait_for_site(out)  # the sweep's site is written after its exit, by a process of its own
    assert "score against frame budget" in (out / "leaderboard" / "benchmarks" / "demo-mc.html").read_text()


@pytest.mark.vllm
@SERVER_GROUP
def test_a_sweep_runs_every_budget_on_one_engine(vllm_server, tmp_path):
    out = tmp_path / "sweep"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", *served_args(vllm_server), "--benchmarks", "demo-mc",
                   "--max-samples", "2", "--max-tokens", "4", "--max-frames", "4,8", "--no-progress", "--no-site",
                   "--workers", "1", "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for budget in (4, 8):
        manifest = json.loads((out / f"max_frames-{budget}" / "manifest.json").read_text())
        assert manifest["benchmarks"]["demo-mc"]["frames"]["max_frames"] == budget
        assert manifest["backend"]["engine_starts"] == 1  # the second budget's run reused the first one's backend
