"""FrameCache and preprocess on real mp4 files: content keys, hits, failures, corruption, timeouts, concurrency."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.videos import BROKEN_KINDS, broken_videos, frame_index, truncate, write_video

from vbench_async.frames import FrameCache, FrameError, FrameSpec, VideoJob, preprocess
from vbench_async.frames.entry_file import CODEC_KEY, META_KEY, read_entry, write_entry

SPEC = FrameSpec("qwen3-vl", max_frames=8, min_pixels=4 * 1024, max_pixels=32 * 1024)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("media")
    for i in range(6):  # distinct content per test, so tests sharing the cache do not see each other's entries
        write_video(d / f"clip{i}.mp4", frames=60 + 10 * i, fps=30)
    write_video(d / "slow.mp4", frames=600, fps=30)  # 20 s: far more than 10 ms of decoding
    write_video(d / "one.mp4", frames=1, fps=30)
    return d


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with FrameCache(tmp_path_factory.mktemp("cache"), workers=2) as c:
        yield c


def test_miss_decode_hit(cache: FrameCache, media: Path) -> None:
    video = media / "clip0.mp4"
    assert cache.get(video, SPEC) is None
    before = cache.decodes
    first = cache.get_or_decode(video, SPEC)
    assert cache.decodes == before + 1
    again = cache.get(video, SPEC)
    assert again is not None and again.key == first.key and len(first.key) == 32
    assert np.array_equal(again.frames, first.frames) and again.meta == first.meta
    assert [frame_index(f) for f in first.frames] == list(first.meta.frames_indices)
    assert cache.get_or_decode(video, SPEC).key == first.key and cache.decodes == before + 1
    meta = first.hf_metadata()
    assert (meta["fps"], meta["total_num_frames"], meta["duration"]) == (30.0, 60, 2.0)
    assert meta["frames_indices"] == list(first.meta.frames_indices) and meta["video_backend"] == "pyav"
    assert first.processor_kwargs() == {"do_sample_frames": False, "do_resize": False}


def test_entry_is_plain_safetensors(cache: FrameCache, media: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    video = cache.get_or_decode(media / "clip0.mp4", SPEC)  # default codec: zstd
    with safe_open(str(cache.layout.entry_path(video.key)), framework="np") as f:
        assert json.loads(f.metadata()[META_KEY])["frames_indices"] == list(video.meta.frames_indices)
        info = json.loads(f.metadata()[CODEC_KEY])
        assert info["codec"] == "zstd" and info["shape"] == list(video.frames.shape)
        assert f.get_tensor("payload").nbytes == info["offsets"][-1] < video.frames.nbytes
    with FrameCache(tmp_path, codec="raw", workers=1) as raw:  # uncompressed: the tensor is the frames themselves
        plain = raw.get_or_decode(media / "clip0.mp4", SPEC)
        with safe_open(str(raw.layout.entry_path(plain.key)), framework="np") as f:
            assert np.array_equal(f.get_tensor("frames"), video.frames) and CODEC_KEY not in f.metadata()


def test_key_follows_content_not_path(cache: FrameCache, media: Path, tmp_path: Path) -> None:
    video = media / "clip1.mp4"
    decoded = cache.get_or_decode(video, SPEC)
    moved = tmp_path / "new_root" / "renamed.mp4"  # the data root moved and the file was renamed
    moved.parent.mkdir()
    shutil.copy(video, moved)
    before = cache.decodes
    hit = cache.get(moved, SPEC)
    assert hit is not None and hit.key == decoded.key and cache.decodes == before
    assert cache.key(video, FrameSpec("qwen3-vl", max_frames=6, min_pixels=4096, max_pixels=32768)) != decoded.key
    assert cache.key(video, SPEC, window=(1.0, None)) != decoded.key
    assert cache.key(video, SPEC, window=(0, None)) == decoded.key  # the same frames, the same key
    other_decoder = FrameCache(cache.root, decoder="decord")  # no worker starts for a key
    assert other_decoder.key(moved, SPEC) == decoded.key
    other_decoder.close()


def test_same_video_in_two_benchmarks_is_stored_once(cache: FrameCache, media: Path, tmp_path: Path) -> None:
    copies = []
    for bench in ("bench_a", "bench_b"):
        (tmp_path / bench).mkdir()
        copies.append(Path(shutil.copy(media / "clip2.mp4", tmp_path / bench / "v.mp4")))
    jobs = [VideoJob(copies[0], SPEC), VideoJob(copies[1], SPEC), VideoJob(copies[1], SPEC)]
    report = preprocess(jobs, cache, workers=2, progress=False)
    assert (report.jobs, report.unique, report.cached, report.reused, report.failed) == (3, 1, 1, 0, 0)
    entries = [p for p in cache.layout.entries() if p.stem == cache.key(copies[0], SPEC)]
    assert len(entries) == 1


def test_bad_inputs_are_recorded_and_the_run_continues(cache: FrameCache, media: Path, tmp_path: Path) -> None:
    broken = broken_videos(tmp_path)
    text = broken["text"]
    good = media / "clip3.mp4"
    jobs = [VideoJob(p, SPEC) for p in (*broken.values(), media / "one.mp4", good)]
    report = preprocess(jobs, cache, workers=2, progress=False)
    kinds = {Path(f.video).name: f.kind for f in report.failures}
    assert kinds == {f"{name}.mp4": kind for name, kind in BROKEN_KINDS.items()}
    assert (report.cached, report.failed) == (2, 5)
    one = cache.get(media / "one.mp4", SPEC)
    assert one is not None and list(one.meta.frames_indices) == [0, 0] and one.meta.clamped

    decodes = cache.decodes
    second = preprocess(jobs, cache, workers=2, progress=False)  # a second pass decodes nothing
    assert (second.cached, second.reused, second.failed) == (0, 2, 5) and cache.decodes == decodes
    record = cache.failure(text, SPEC)
    assert record is not None and record.kind == "decode_error" and record.decoder == "pyav"
    assert record.time > 0 and record.video == str(text)
    with pytest.raises(FrameError, match="recorded") as err:
        cache.get_or_decode(text, SPEC)
    assert err.value.kind == "decode_error" and cache.decodes == decodes
    with pytest.raises(FrameError):
        cache.get_or_decode(text, SPEC, retry_failed=True)  # asked for: decoded again (and fails again)
    assert cache.decodes == decodes + 1


def test_corrupt_entries_are_removed_and_rebuilt(cache: FrameCache, media: Path) -> None:
    video = media / "clip4.mp4"
    original = cache.get_or_decode(video, SPEC)
    path = cache.layout.entry_path(original.key)

    truncate(path, 0.7)  # truncated safetensors
    assert cache.get(video, SPEC) is None and not path.exists()
    before = cache.decodes
    rebuilt = cache.get_or_decode(video, SPEC)
    assert cache.decodes == before + 1 and np.array_equal(rebuilt.frames, original.frames)

    from dataclasses import replace

    from safetensors.numpy import save_file

    lying = replace(rebuilt.meta, resized_height=rebuilt.meta.resized_height + 32)  # disagrees with the tensor
    save_file({"frames": rebuilt.frames}, str(path), metadata={META_KEY: json.dumps(lying.to_dict())})
    assert cache.get(video, SPEC) is None and not path.exists()

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    again = cache.get_or_decode(video, SPEC)  # rebuilt again
    assert np.array_equal(again.frames, rebuilt.frames) and again.meta.frames_indices == rebuilt.meta.frames_indices
    assert cache.decodes == before + 2


def test_threads_asking_for_one_video_share_one_decode(cache: FrameCache, media: Path) -> None:
    video, before, results = media / "clip5.mp4", cache.decodes, []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_decode(video, SPEC))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and len({r.key for r in results}) == 1
    assert cache.decodes == before + 1


def test_timeout_kills_the_worker_and_is_not_recorded(cache: FrameCache, media: Path) -> None:
    """A timeout may be the machine's load, not the video: no failure record, the next call decodes again."""
    slow = media / "slow.mp4"
    spec = FrameSpec("qwen3-vl", max_frames=32, min_pixels=16 * 1024, max_pixels=16 * 1024)
    with FrameCache(cache.root, timeout_s=0.01, workers=1) as hasty:
        with pytest.raises(FrameError) as err:
            hasty.get_or_decode(slow, spec)
    assert err.value.kind == "decode_timeout" and "0.01 s" in str(err.value)
    assert cache.failure(slow, spec) is None
    assert not list(cache.layout.temp_files())  # the killed worker's partial file is gone
    fine = cache.get_or_decode(slow, spec)  # tried again by default, with a sane timeout
    assert fine.frames.shape[0] == 32 and cache.failure(slow, spec) is None


def test_a_crashed_worker_is_a_transient_failure_and_is_replaced(cache: FrameCache, media: Path) -> None:
    slow = media / "slow.mp4"
    spec = FrameSpec("qwen3-vl", max_frames=32, min_pixels=24 * 1024, max_pixels=24 * 1024)
    outcome: list[BaseException] = []

    def decode() -> None:
        try:
            cache.get_or_decode(slow, spec)
        except FrameError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=decode)
    thread.start()
    deadline = time.monotonic() + 30
    while not cache._pool.busy_pids() and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in cache._pool.busy_pids():
        os.kill(pid, signal.SIGKILL)  # what the out-of-memory killer would do
    thread.join()
    assert outcome and outcome[0].kind == "decoder_crash" and "code -9" in str(outcome[0])
    assert cache.failure(slow, spec) is None  # not the video's fault: the next run decodes it again
    assert cache.get_or_decode(media / "clip0.mp4", SPEC).frames.shape[0] == 4  # the pool carries on


def test_concurrent_writer_processes_never_expose_a_partial_entry(cache: FrameCache, media: Path, tmp_path) -> None:
    source = cache.get_or_decode(media / "clip0.mp4", SPEC)
    target = tmp_path / "shared" / "entry.safetensors"
    fingerprint = cache.fingerprint(media / "clip0.mp4")
    write_entry(target, source.frames, source.meta, video=fingerprint)
    script = (
        "import sys; from pathlib import Path; from vbench_async.frames.entry_file import read_entry, write_entry\n"
        f"frames, meta = read_entry(Path({str(cache.layout.entry_path(source.key))!r}))\n"
        f"for _ in range(40): write_entry(Path({str(target)!r}), frames, meta, video={fingerprint!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    writers = [subprocess.Popen([sys.executable, "-c", script], env=env) for _ in range(2)]
    reads = 0
    while any(w.poll() is None for w in writers):
        frames, meta = read_entry(target)  # raises CorruptEntry on any partial or torn file
        assert meta == source.meta and frames.shape == source.frames.shape
        reads += 1
    assert all(w.returncode == 0 for w in writers) and reads > 0
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".tmp-")]
