"""Cache maintenance beside runs, on real mp4 files: readers and writers of one cache while `gc`, `compact` and
`verify --delete` loop, every served frame checked against a fresh decode. Nothing served may differ from the
truth, no run may fail or record a final failure, maintenance may not raise, and the cache must end valid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.cache_stress import Tally, maintenance_loop, rewrite_loop, stress, truth
from support.videos import write_video

from vbench_async.frames.layout import CacheLayout
from vbench_async.frames.maintenance import verify_cache

REPO = Path(__file__).resolve().parents[1]


def _videos(folder: Path, n: int) -> list[Path]:
    return [write_video(folder / f"v{i}.mp4", frames=30, fps=10, natural=True, seed=10 + i) for i in range(n)]


def _check(tally: Tally, root: Path) -> None:
    assert tally.wrong == [], f"frames differing from a fresh decode were served for {sorted(set(tally.wrong))}"
    assert tally.final_errors() == {}, tally.errors
    assert tally.served > 0
    assert verify_cache(root).corrupt == []
    assert list(CacheLayout(root).failures()) == []  # nothing recorded against a video


def test_readers_writers_and_maintenance_share_one_cache(tmp_path: Path) -> None:
    videos = _videos(tmp_path / "videos", 3)
    tally = stress(tmp_path / "cache", videos, rounds=6)
    _check(tally, tmp_path / "cache")


@pytest.mark.slow
def test_two_run_processes_share_one_cache_beside_maintenance_for_many_rounds(tmp_path: Path) -> None:
    """Several rounds; in each, two processes (a zstd and a raw writer, as two runs with different codecs) read
    every video many times while a rewriter and gc/compact/verify loop in this process."""
    videos = _videos(tmp_path / "videos", 5)
    (tmp_path / "videos" / "truth.json").write_text(json.dumps(truth(videos)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    total = Tally()
    for round_ in range(int(os.environ.get("VBENCH_CACHE_STRESS_ROUNDS", "4"))):
        root = tmp_path / f"cache{round_}"
        stop, side = threading.Event(), Tally()
        helpers = [threading.Thread(target=rewrite_loop, args=(root, videos, stop, side)),
                   threading.Thread(target=maintenance_loop, args=(root, stop, side))]
        for t in helpers:
            t.start()
        outs = [tmp_path / f"run{round_}-{codec}.json" for codec in ("zstd", "raw")]
        runs = [subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "cache_stress.py"), str(root),
                                  str(tmp_path / "videos"), "25", out.stem.split("-")[1], str(out)], env=env)
                for out in outs]
        codes = [r.wait(timeout=900) for r in runs]
        stop.set()
        for t in helpers:
            t.join()
        assert codes == [0, 0]
        for out in outs:
            got = json.loads(out.read_text())
            total.add(Tally(got["served"], got["wrong"], got["errors"]))
        total.add(side)
        _check(total, root)
    print(f"\nstress: {total.served} loads checked, errors {dict(total.errors)}")


def _data(folder: Path, videos: int, questions: int) -> Path:
    """An mmvu-shaped annotation file over `videos` synthetic videos, `questions` questions each (cache hits)."""
    from support.hostile import _good, write_data_map

    for i in range(videos):
        write_video(folder / "videos" / f"v{i}.mp4", frames=30, fps=10, natural=True, seed=40 + i)
    records = [_good(f"v{i}-q{j}", path=f"v{i}.mp4") for i in range(videos) for j in range(questions)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return write_data_map(folder, "records.jsonl")


@pytest.mark.slow
def test_two_real_runs_share_one_cache_beside_maintenance_and_record_the_true_frames(tmp_path: Path) -> None:
    """Several rounds of two real `vbench-async run` processes (tiny Qwen2.5-VL, the openai backend against a local
    server, one zstd and one raw cache writer) on one --cache-dir, while gc, compact and verify --delete loop in
    this process. Every result line must record the frames a fresh decode outside the cache gives (the cache key of
    the video's true content, the source frame numbers, times and size), every sample must score, and the cache
    must end valid, each video's entry holding exactly the freshly decoded frames (the last round's gc keeps entries;
    the earlier rounds' takes every one, so those rounds decode and write everything again beside it)."""
    import numpy as np
    from support.fault_server import FaultServer, openai_args

    from vbench_async.benchmarks import get_benchmark
    from vbench_async.frames import FrameCache
    from vbench_async.frames.extract import decode_video
    from vbench_async.frames.store import read_entry
    from vbench_async.models import family_ref
    from vbench_async.results.lines import read_lines

    videos, questions = 4, 3
    data_map = _data(tmp_path / "data", videos, questions)
    spec = get_benchmark("mmvu").frame_spec(family_ref("qwen2.5-vl"), {"max_frames": 4, "max_pixels": 16384})
    with FrameCache(tmp_path / "fresh-keys", workers=1) as keys:  # keys from the bytes, no memo of the shared cache
        truth_by_video = {}
        for video in sorted((tmp_path / "data" / "videos").glob("*.mp4")):
            frames, meta = decode_video(video, spec)
            truth_by_video[video.name] = (keys.key(video, spec), frames, meta)
    root = tmp_path / "cache"
    side = Tally()
    rounds = int(os.environ.get("VBENCH_CACHE_STRESS_RUN_ROUNDS", "3"))
    with FaultServer() as server:
        for round_ in range(rounds):
            stop = threading.Event()
            # The last round's gc keeps the entries (none is a year old), so they are there to check at the end.
            gc_days = 365 if round_ == rounds - 1 else 0
            helper = threading.Thread(target=maintenance_loop, args=(root, stop, side, gc_days))
            helper.start()
            outs = [tmp_path / f"run{round_}-{codec}" for codec in ("zstd", "raw")]
            try:
                runs = [subprocess.Popen([sys.executable, "-m", "vbench_async",
                                          *openai_args(data_map, out, root, server.url, "--concurrency", "2")],
                                         cwd=REPO, env={**os.environ, "VBENCH_ASYNC_CACHE_CODEC": codec},
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                        for out, codec in zip(outs, ("zstd", "raw"))]
                logs = [r.communicate(timeout=600)[0] for r in runs]
            finally:
                stop.set()
                helper.join()
            for out, run, log in zip(outs, runs, logs):
                assert run.returncode == 0, log[-3000:]
                summary = json.loads((out / "summary.json").read_text())["benchmarks"]["mmvu"]
                assert (summary["n_total"], summary["n_failed"], summary["complete"]) == \
                    (videos * questions, 0, True), (summary, log[-2000:])
                lines = [r for f in (out / "results").glob("*.jsonl") for r in read_lines(f).values()]
                assert len(lines) == videos * questions
                for line in lines:
                    key, frames, meta = truth_by_video[Path(line["video"]).name]
                    seen = line["frames"]
                    assert seen["cache_key"] == key, line["sample_id"]
                    assert seen["indices"] == list(meta.frames_indices), line["sample_id"]
                    assert seen["n"] == len(frames) and seen["size"] == list(frames.shape[1:3]), line["sample_id"]
                    assert seen["fps"] == pytest.approx(meta.fps) and seen["timestamps"] == pytest.approx(
                        [i / meta.fps for i in meta.frames_indices], abs=1e-3), line["sample_id"]
    assert side.final_errors() == {}, side.errors
    assert verify_cache(root).corrupt == [] and list(CacheLayout(root).failures()) == []
    left = 0
    for key, frames, _ in truth_by_video.values():  # written by the last round's runs, compacted beside them
        got, _ = read_entry(CacheLayout(root).entry_path(key))
        assert np.array_equal(got, frames), key
        left += 1
    print(f"\n{rounds} rounds of two runs: {2 * rounds * videos * questions} lines checked, {left} entries left, "
          f"maintenance errors {dict(side.errors)}")
