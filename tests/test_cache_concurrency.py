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
