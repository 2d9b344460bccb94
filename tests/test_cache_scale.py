"""The frame cache at suite scale, on real mp4 files: lossless compressed entries, collision-safe keys, a disk budget
that never evicts what queued requests need, bytes by benchmark, the planner's fit check, and migration."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.videos import write_video

from vbench_async.cli import main
from vbench_async.frames import FrameCache, FrameSpec, VideoJob, preprocess
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.disk_budget import PlannedEntry, check_cache_fit
from vbench_async.frames.entry_file import CorruptEntry, read_entry, read_header, write_entry
from vbench_async.frames.maintenance import cache_stats, compact_cache, verify_cache
from vbench_async.models import family_ref

SPEC = FrameSpec("qwen2.5-vl", max_frames=8, min_pixels=8 * 1024, max_pixels=48 * 1024)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("scale_media")
    for i in range(5):  # same length and size, different content: entries of about equal size
        write_video(d / f"n{i}.mp4", seconds=2, fps=15, width=256, height=144, natural=True, seed=i)
    return d


def demo_videos(both_families: bool = True) -> list[tuple[Path, FrameSpec]]:
    """(video, spec) of every demo video under the Qwen2.5-VL and the Qwen3-VL frame specs; not `both_families`:
    each video once, the two specs taking turns (every video and both specs, half the decodes)."""
    from vbench_async.benchmarks import resolve_benchmarks

    out: dict[tuple[str, FrameSpec], None] = {}
    seen: dict[str, None] = {}
    for bench in resolve_benchmarks("demo", None):
        specs = [bench.frame_spec(family_ref(family), {}) for family in ("qwen2.5-vl", "qwen3-vl")]
        for sample in bench.load_samples(None):
            if not sample.video:
                continue
            video = str(bench.video_path(sample, None))
            if both_families:
                out.update({(video, spec): None for spec in specs})
            elif video not in seen:
                seen[video] = None
                out[(video, specs[len(seen) % 2])] = None
    return [(Path(v), s) for v, s in out]


@pytest.mark.parametrize("both_families", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["each_video_once", "both_families"])
def test_zstd_entries_give_back_the_decoders_frames_on_every_demo_video(tmp_path: Path, both_families: bool) -> None:
    videos = demo_videos(both_families)
    assert len({v for v, _ in videos}) >= 20 and len({s.family for _, s in videos}) == 2
    raw_total = stored_total = 0
    for i, (video, spec) in enumerate(videos):
        frames, meta = decode_video(video, spec)
        path = tmp_path / f"{i}.safetensors"
        stored_total += write_entry(path, frames, meta, "zstd", video=f"{i:040x}")
        raw_total += frames.nbytes
        again, meta_again = read_entry(path)
        assert np.array_equal(again, frames) and again.dtype == np.uint8 and meta_again == meta, video
        assert read_header(path).codec == "zstd"
    assert stored_total < 0.5 * raw_total  # the demo's flat scenes compress far better than camera footage


def test_a_damaged_compressed_entry_is_caught(media: Path, tmp_path: Path) -> None:
    frames, meta = decode_video(media / "n0.mp4", SPEC)
    path = tmp_path / "e.safetensors"
    write_entry(path, frames, meta, "zstd", video="0" * 40)
    header = read_header(path)
    data = bytearray(path.read_bytes())
    data[header.data_offset + header.data_size // 2] ^= 0xFF  # one flipped byte inside a frame's zstd stream
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptEntry):
        read_entry(path)


def test_files_differing_only_mid_file_get_different_keys_and_frames(media: Path, tmp_path: Path) -> None:
    # The old default fingerprint read five 64 KiB blocks (head, quarters, tail): bytes between them were invisible,
    # so these two files shared a cache key and a vLLM multimodal uuid, and one was served the other's frames.
    original = tmp_path / "a.mp4"
    write_video(original, seconds=12, fps=30, width=320, height=180, textured=True, seed=7)
    size = original.stat().st_size
    assert size > 10 * 64 * 1024
    edited = tmp_path / "b.mp4"
    data = bytearray(original.read_bytes())
    spot = 3 * size // 8  # between the quarter and half blocks
    data[spot:spot + 64] = bytes(b ^ 0x5A for b in data[spot:spot + 64])
    edited.write_bytes(bytes(data))
    with FrameCache(tmp_path / "cache", workers=1) as cache:
        assert cache.key(original, SPEC) != cache.key(edited, SPEC)
        served = cache.get_or_decode(original, SPEC)
        assert cache.get(edited, SPEC) is None  # a miss: never the other file's frames
        assert served.key == cache.key(original, SPEC)
    sampled = FrameCache(tmp_path / "cache2", fingerprint="sampled")  # the opt-in fast mode collides, as documented
    assert sampled.key(original, SPEC) == sampled.key(edited, SPEC)
    sampled.close()


def test_fingerprints_are_remembered_on_disk_and_forgotten_when_the_file_changes(media: Path, tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    shutil.copy(media / "n1.mp4", video)
    first = FrameCache(tmp_path / "cache")
    key = first.key(video, SPEC)
    records = list((tmp_path / "cache" / "vbf1" / "fingerprints").glob("*/*.json"))
    assert len(records) == 1
    assert FrameCache(tmp_path / "cache").key(video, SPEC) == key  # a new process reads the record
    st = video.stat()
    data = bytearray(video.read_bytes())
    data[len(data) // 2] ^= 1  # same size, same mtime (restored below): only the content and ctime change
    video.write_bytes(bytes(data))
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert FrameCache(tmp_path / "cache").key(video, SPEC) != key


def test_budget_evicts_least_recently_used_but_never_a_reserved_entry(media: Path, tmp_path: Path) -> None:
    a, b, c, d = (media / f"n{i}.mp4" for i in range(4))
    with FrameCache(tmp_path / "probe", workers=1) as probe:
        size = probe.layout.entry_path(probe.get_or_decode(a, SPEC).key).stat().st_size
    with FrameCache(tmp_path / "cache", workers=1, max_bytes=int(size * 1.6)) as cache:
        path = {v: cache.layout.entry_path(cache.key(v, SPEC)) for v in (a, b, c, d)}
        assert cache.reserve([VideoJob(a, SPEC, benchmark="x"), VideoJob(b, SPEC, benchmark="x")]) == 2
        report = preprocess([VideoJob(v, SPEC) for v in (a, b, c)], cache, workers=1, progress=False)
        assert (report.cached, report.deferred, report.failed) == (2, 1, 0)  # a and b are reserved: c must wait
        assert path[a].exists() and path[b].exists() and not path[c].exists()

        cache.get_or_decode(a, SPEC)  # a's queued request loaded it: a may go now
        cache.get_or_decode(c, SPEC)  # decoded on demand; the budget evicts a, never the still-reserved b
        assert not path[a].exists() and path[b].exists() and path[c].exists()

        cache.get_or_decode(b, SPEC)
        cache.get_or_decode(d, SPEC)  # c (older) and b go: d alone fits
        assert [p.exists() for p in (path[a], path[b], path[c], path[d])] == [False, False, False, True]
        assert cache.budget.total() <= cache.budget.max_bytes and cache.budget.evicted == 3
        frames, _ = decode_video(b, SPEC)
        assert np.array_equal(cache.get_or_decode(b, SPEC).frames, frames)  # an evicted entry is simply rebuilt


def test_stats_by_benchmark_and_the_planners_fit_check(media: Path, tmp_path: Path, capsys) -> None:
    root = tmp_path / "cache"
    with FrameCache(root, workers=1) as cache:
        jobs = [VideoJob(media / "n0.mp4", SPEC, benchmark="bench-a"), VideoJob(media / "n1.mp4", SPEC,
                benchmark="bench-a"), VideoJob(media / "n1.mp4", SPEC, benchmark="bench-b")]
        preprocess(jobs, cache, workers=1, progress=False)
        keys = [cache.key(media / f"n{i}.mp4", SPEC) for i in range(3)]
        present = [cache.layout.entry_path(k).stat().st_size for k in keys[:2]]
    stats = cache_stats(root)
    assert stats.by_benchmark == {"bench-a": (2, sum(present)), "bench-b": (1, present[1])}
    assert stats.codecs == {"zstd": 2} and stats.bytes < stats.raw_bytes
    assert main(["cache", "stats", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "bench-a" in out and "bench-b" in out and "x of raw uint8" in out

    raw = 8 * 144 * 256 * 3
    fit = check_cache_fit(root, [PlannedEntry(raw, keys[0]), PlannedEntry(raw, keys[1]), PlannedEntry(raw, keys[1]),
                                 PlannedEntry(raw, keys[2])], max_bytes=10**9)
    assert (fit.entries, fit.cached, fit.cached_bytes) == (3, 2, sum(present))
    assert 0 < fit.ratio < 1 and fit.new_bytes == int(raw * fit.ratio)  # learnt from the entries present
    assert fit.fits_budget and fit.fits_disk and fit.warnings() == []
    tight = check_cache_fit(root, [PlannedEntry(raw, keys[2])], max_bytes=1)
    assert not tight.fits_budget and "over the" in tight.warnings()[0]
    huge = check_cache_fit(root, [PlannedEntry(10**18)])
    assert not huge.fits_disk and "disk is free" in huge.warnings()[-1]


def test_uncompressed_entries_stay_readable_and_compact_rewrites_them(media: Path, tmp_path: Path, capsys) -> None:
    root = tmp_path / "cache"
    with FrameCache(root, codec="raw", workers=1) as old:  # what earlier versions wrote
        before = {v: old.get_or_decode(media / v, SPEC) for v in ("n2.mp4", "n3.mp4")}
    with FrameCache(root, workers=1) as cache:
        for name, video in before.items():
            hit = cache.get(media / name, SPEC)  # read as they are, no decode
            assert hit is not None and np.array_equal(hit.frames, video.frames)
        assert cache.decodes == 0
    sizes = {p: p.stat().st_size for p in cache.layout.entries()}
    assert main(["cache", "compact", "--dry-run", "--cache-dir", str(root)]) == 0
    assert "would rewrite 2 entries" in capsys.readouterr().out
    assert main(["cache", "compact", "--cache-dir", str(root)]) == 0
    assert "rewrote 2 entries" in capsys.readouterr().out
    for path, size in sizes.items():
        assert read_header(path).codec == "zstd" and path.stat().st_size < size
    with FrameCache(root, workers=1) as cache:
        for name, video in before.items():
            assert np.array_equal(cache.get(media / name, SPEC).frames, video.frames)
    assert compact_cache(root).rewritten == 0 and not verify_cache(root).corrupt


def test_an_entry_that_cannot_be_written_is_not_recorded_as_the_videos_failure(media: Path, tmp_path: Path) -> None:
    from vbench_async.frames import FrameError

    with FrameCache(tmp_path / "cache", workers=1) as cache:
        key = cache.key(media / "n4.mp4", SPEC)
        shard = cache.layout.entry_path(key).parent
        shard.parent.mkdir(parents=True)
        shard.write_text("a file where the shard directory should be")  # as good as a full disk or a lost mount
        with pytest.raises(FrameError) as err:
            cache.get_or_decode(media / "n4.mp4", SPEC)
        assert err.value.kind == "cache_unwritable"
        assert cache.failure(media / "n4.mp4", SPEC) is None  # not the video's fault: tried again next time
        shard.unlink()
        assert cache.get_or_decode(media / "n4.mp4", SPEC).frames.shape[0] > 0
