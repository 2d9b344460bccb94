"""The frame cache never serves another video's frames through its fingerprint records, and never hangs on a FIFO
(issue 37): a record (`vbf1/fingerprints/*/*.json`) whose digest was changed to another video's passed `cache
verify` and made the next run send that video's frames; a FIFO in place of an entry or a record hung `run`, `cache
verify`, `stats` and `compact`."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from support.videos import write_video

from vbench_async.frames import FrameCache, FrameSpec
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.layout import CacheLayout
from vbench_async.frames.maintenance import cache_stats, compact_cache, verify_cache

SPEC = FrameSpec("qwen3-vl", max_frames=4, min_pixels=2 * 1024, max_pixels=8 * 1024)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("forged_media")
    write_video(d / "red.mp4", frames=40, fps=10, natural=True, seed=1)
    write_video(d / "blue.mp4", frames=40, fps=10, natural=True, seed=2)
    return d


def _record_of(root: Path, video: Path) -> Path:
    (path,) = [p for p in CacheLayout(root).fingerprint_records()
               if json.loads(p.read_text())["path"] == os.path.abspath(video)]
    return path


def test_a_fingerprint_record_pointing_at_another_video_is_never_used(media: Path, tmp_path: Path) -> None:
    red, blue = media / "red.mp4", media / "blue.mp4"
    with FrameCache(tmp_path, workers=1) as cache:
        cache.get_or_decode(red, SPEC)
        blue_digest = cache.fingerprint(blue)
        cache.get_or_decode(blue, SPEC)
    record = _record_of(tmp_path, red)
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "digest": blue_digest}))  # red's record now names blue's content

    report = verify_cache(tmp_path)
    assert str(record) in [p for p, _ in report.corrupt], report.corrupt
    with FrameCache(tmp_path, workers=1) as cache:  # a fresh process's view: no in-memory memo
        assert cache.fingerprint(red) != blue_digest
        served = cache.get_or_decode(red, SPEC)
    assert np.array_equal(served.frames, decode_video(red, SPEC)[0])  # red's own frames, not blue's
    assert verify_cache(tmp_path).corrupt == []  # the record was rewritten from the file itself


def _ends(fn: Callable[[], Any], within_s: float = 30.0) -> Any:
    """`fn()` in a daemon thread; fails when it does not return in time (a blocking open of a FIFO never does)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(within_s)
    assert not t.is_alive(), f"{fn} hung"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_a_fifo_in_the_cache_is_refused_without_a_hang(media: Path, tmp_path: Path) -> None:
    red, blue = media / "red.mp4", media / "blue.mp4"
    with FrameCache(tmp_path, workers=1) as cache:
        entry = cache.layout.entry_path(cache.get_or_decode(red, SPEC).key)
        cache.get_or_decode(blue, SPEC)
    layout = CacheLayout(tmp_path)
    for path in (entry, _record_of(tmp_path, blue)):
        path.unlink()
        os.mkfifo(path)
    failures = layout.base / "failures"
    failures.mkdir(parents=True, exist_ok=True)
    os.mkfifo(failures / ("0" * 32 + ".json"))

    report = _ends(lambda: verify_cache(tmp_path))
    assert {str(entry), str(_record_of_fifo(layout))} <= {p for p, _ in report.corrupt}, report.corrupt
    stats = _ends(lambda: cache_stats(tmp_path))
    assert stats.unreadable == 1
    _ends(lambda: compact_cache(tmp_path))

    def run_again() -> list[np.ndarray]:
        with FrameCache(tmp_path, workers=1) as cache:
            return [cache.get_or_decode(v, SPEC).frames for v in (red, blue)]

    frames = _ends(run_again, within_s=120)
    assert np.array_equal(frames[0], decode_video(red, SPEC)[0])
    assert np.array_equal(frames[1], decode_video(blue, SPEC)[0])
    assert verify_cache(tmp_path).corrupt == []  # the FIFOs were replaced by the rebuilt entry and record


def _record_of_fifo(layout: CacheLayout) -> Path:
    (path,) = [p for p in layout.fingerprint_records() if not p.is_file()]
    return path
