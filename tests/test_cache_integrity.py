"""Frame-cache entries are bound to their key and checksummed over header and payload, on real mp4 files: an entry
copied over another video's, edited header bytes, every single-bit flip of a header, and entries of an earlier
version (no checksum) are never served, `cache verify` reports them, and the next load rebuilds the true frames."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.videos import write_video

from vbench_async.frames import FrameCache, FrameSpec
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.entry_file import META_KEY, CorruptEntry, read_entry, write_entry
from vbench_async.frames.keys import fingerprint
from vbench_async.frames.maintenance import compact_cache, verify_cache

SPEC = FrameSpec("qwen3-vl", max_frames=4, min_pixels=2 * 1024, max_pixels=8 * 1024)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("integrity_media")
    write_video(d / "red.mp4", frames=40, fps=10, natural=True, seed=1)  # same size and length, other content
    write_video(d / "blue.mp4", frames=40, fps=10, natural=True, seed=2)
    return d


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache (one decode worker) for the module: every test leaves its entries rebuilt and valid."""
    with FrameCache(tmp_path_factory.mktemp("cache"), workers=1) as c:
        yield c


def _rebuilt_exactly(cache: FrameCache, video: Path) -> None:
    frames, meta = decode_video(video, SPEC)
    before = cache.decodes
    again = cache.get_or_decode(video, SPEC)
    assert cache.decodes == before + 1  # decoded again, not served from the bad entry
    assert np.array_equal(again.frames, frames) and again.meta.frames_indices == meta.frames_indices
    assert again.meta.fps == meta.fps
    assert verify_cache(cache.root).corrupt == []


def test_an_entry_copied_over_another_videos_entry_is_caught_and_never_served(media: Path, cache: FrameCache) -> None:
    red = cache.get_or_decode(media / "red.mp4", SPEC)
    blue = cache.get_or_decode(media / "blue.mp4", SPEC)
    assert not np.array_equal(red.frames, blue.frames)
    blue_path = cache.layout.entry_path(blue.key)
    shutil.copyfile(cache.layout.entry_path(red.key), blue_path)  # the red video's entry under the blue one's key

    report = verify_cache(cache.root)
    assert [p for p, _ in report.corrupt] == [str(blue_path)] and "belongs to key" in report.corrupt[0][1]
    assert [p for p, _ in verify_cache(cache.root, deep=False).corrupt] == [str(blue_path)]  # the header alone tells
    assert cache.get(media / "blue.mp4", SPEC) is None  # never the red frames for the blue video's questions
    _rebuilt_exactly(cache, media / "blue.mp4")
    assert np.array_equal(cache.get(media / "red.mp4", SPEC).frames, red.frames)  # the source is untouched


def _edit(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1, old
    path.write_bytes(data.replace(old, new))  # same length: the file still parses and its sizes still agree


def _meta_bytes(path: Path) -> tuple[dict, bytes]:
    """The entry's metadata and its exact bytes inside the header (JSON in a JSON string, so quotes are escaped)."""
    data = path.read_bytes()
    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    text = header["__metadata__"][META_KEY]
    return json.loads(text), json.dumps(text)[1:-1].encode()


def test_edited_header_bytes_fps_and_one_frame_index_are_caught(media: Path, cache: FrameCache) -> None:
    video = media / "red.mp4"
    entry = cache.get_or_decode(video, SPEC)
    path = cache.layout.entry_path(entry.key)
    meta, _ = _meta_bytes(path)
    assert meta["fps"] == 10.0
    _edit(path, b'\\"fps\\": 10.0', b'\\"fps\\": 90.0')  # the hostile test's edit: wrong fps and timestamps
    assert [p for p, _ in verify_cache(cache.root).corrupt] == [str(path)]
    assert [p for p, _ in verify_cache(cache.root, deep=False).corrupt] == [str(path)]
    assert cache.get(video, SPEC) is None
    _rebuilt_exactly(cache, video)

    indices = cache.get(video, SPEC).meta.frames_indices
    last = str(indices[-1]).encode()
    edited = str(indices[-1] - 1).encode().rjust(len(last))  # one frame index, same number of bytes
    _edit(path, b", " + last + b"]", b", " + edited + b"]")
    assert [p for p, _ in verify_cache(cache.root).corrupt] == [str(path)]
    assert cache.get(video, SPEC) is None
    _rebuilt_exactly(cache, video)


@pytest.mark.parametrize("codec", ["zstd", "raw"])
def test_every_single_bit_flip_of_the_header_is_caught(media: Path, tmp_path: Path, codec: str) -> None:
    frames, meta = decode_video(media / "blue.mp4", SPEC)
    path = tmp_path / "entry.safetensors"
    write_entry(path, frames, meta, codec, video=fingerprint(media / "blue.mp4"))
    good = path.read_bytes()
    header_end = 8 + int.from_bytes(good[:8], "little")
    flipped = tmp_path / "flipped.safetensors"
    flipped.write_bytes(good)
    payload_bits = range(header_end * 8, len(good) * 8, max(1, (len(good) - header_end) * 8 // 64))
    served = []
    with open(flipped, "r+b", buffering=0) as f:  # flipped in place and back (re-creating the file is slow here)
        for bit in [*range(header_end * 8), *payload_bits]:  # every header bit, and 64 spread over the payload
            at = bit // 8
            f.seek(at)
            f.write(bytes([good[at] ^ (1 << (bit % 8))]))
            try:
                read_entry(flipped)
                served.append(bit)
            except CorruptEntry:
                pass
            f.seek(at)
            f.write(good[at:at + 1])
    assert served == [], f"{len(served)} flipped bits were served, first at byte {served[0] // 8}"
    assert np.array_equal(read_entry(flipped)[0], frames)  # and the file flipped back is served again


def test_an_entry_without_a_checksum_is_a_miss_and_rebuilt(media: Path, cache: FrameCache) -> None:
    """What earlier versions wrote (frames and metadata, no key binding, no checksum): not served, rebuilt."""
    from safetensors.numpy import save_file

    video = media / "red.mp4"
    entry = cache.get_or_decode(video, SPEC)
    path = cache.layout.entry_path(entry.key)
    save_file({"frames": entry.frames}, str(path), metadata={META_KEY: json.dumps(entry.meta.to_dict())})
    report = verify_cache(cache.root)
    assert report.unverified == 1 and "no checksum" in report.corrupt[0][1]
    assert cache.get(video, SPEC) is None and not path.exists()
    _rebuilt_exactly(cache, video)
    save_file({"frames": entry.frames}, str(path), metadata={META_KEY: json.dumps(entry.meta.to_dict())})
    assert compact_cache(cache.root).corrupt == 1 and not path.exists()  # compact removes it: rebuilt on next use


def test_a_runs_cache_writes_raw_and_compresses_off_the_critical_path(media: Path, tmp_path: Path) -> None:
    """`compress_later` (what `run` uses): the entry is raw when first served, then rewritten to zstd by the idle
    compactor with the same frames and a valid checksum."""
    from vbench_async.frames.entry_file import read_header

    frames, _ = decode_video(media / "blue.mp4", SPEC)
    cache = FrameCache(tmp_path / "cache", workers=1, compress_later=True)
    served = cache.get_or_decode(media / "blue.mp4", SPEC)
    path = cache.layout.entry_path(served.key)
    assert np.array_equal(served.frames, frames)
    cache.close(compact_wait_s=120)
    assert read_header(path).codec == "zstd"
    assert np.array_equal(read_entry(path, served.key)[0], frames) and verify_cache(cache.root).corrupt == []
