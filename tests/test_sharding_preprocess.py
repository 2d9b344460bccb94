"""`preprocess --shard K/N` onto one shared cache: concurrent processes, disjoint work, a complete and valid cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import REPO

from vbench_async.benchmarks import get_benchmark
from vbench_async.frames import FrameCache
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.entry_file import read_entry
from vbench_async.frames.layout import CacheLayout
from vbench_async.models import family_ref

ARGS = ("--benchmarks", "demo-mc", "--family", "qwen2.5-vl", "--max-frames", "8", "--workers", "1",
        "--no-progress")
REPORT = re.compile(r"(\d+) jobs, (\d+) unique videos: (\d+) cached, (\d+) reused, (\d+) failed")


def preprocess_concurrently(cache: Path, *extra: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Start one `preprocess` per entry of `extra` at once; wait; return each one's report numbers."""
    procs = [subprocess.Popen([sys.executable, "-m", "vbench_async", "preprocess", *ARGS, "--cache-dir", str(cache),
                               *more], cwd=REPO, env=os.environ.copy(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for more in extra]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        reports.append(tuple(int(x) for x in REPORT.search(out).groups()))
    return reports


def expected_keys(cache: Path) -> set[str]:
    """Cache keys of every video the benchmark needs, computed here (not by the processes under test)."""
    bench = get_benchmark("demo-mc")
    spec = bench.frame_spec(family_ref("qwen2.5-vl"), {"max_frames": 8})
    with FrameCache(cache) as fc:
        return {fc.key(bench.video_path(s, None), spec, s.window) for s in bench.load_samples(None)}


def check_cache(cache: Path) -> None:
    layout = CacheLayout(cache)
    entries = list(layout.entries())
    assert {p.stem for p in entries} == expected_keys(cache)
    bench = get_benchmark("demo-mc")
    spec = bench.frame_spec(family_ref("qwen2.5-vl"), {"max_frames": 8})
    with FrameCache(cache) as fc:
        sources = {fc.key(bench.video_path(s, None), spec, s.window): (bench.video_path(s, None), s.window)
                   for s in bench.load_samples(None)}
    for path in entries:
        frames, meta = read_entry(path)  # raises on a partial or corrupt entry (size, header or zstd checksum)
        assert frames.shape[0] == meta.num_frames <= 8
        video, window = sources[path.stem]
        assert np.array_equal(frames, decode_video(video, spec, window)[0])  # the very frames, not just valid ones
    assert not list(layout.temp_files()) and not list(layout.failures())


def test_two_shards_decode_disjoint_halves_into_one_cache(tmp_path):
    cache = tmp_path / "cache"
    shard0, shard1 = preprocess_concurrently(cache, ("--shard", "0/2"), ("--shard", "1/2"))
    check_cache(cache)  # together they decoded every video the benchmark needs...
    unique = len(expected_keys(cache))
    assert shard0[2] + shard1[2] == unique and shard0[3] == shard1[3] == 0  # ...each exactly once
    assert shard0[0] + shard1[0] == len(get_benchmark("demo-mc").load_samples(None))  # each question in one shard
    assert shard0[2] and shard1[2]  # both did work


def test_overlapping_writers_leave_a_valid_cache(tmp_path):
    # Two unsharded processes decode the same videos at the same time: entries are written under unique temporary
    # names and renamed into place, so the loser's rename just replaces an identical file.
    cache = tmp_path / "cache"
    first, second = preprocess_concurrently(cache, (), ())
    assert first[1] == second[1] == len(expected_keys(cache)) and first[4] == second[4] == 0
    check_cache(cache)
