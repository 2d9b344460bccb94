"""Decoders and decode+sample+resize on real generated mp4 files (each frame carries its own index)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.videos import BROKEN_KINDS, broken_videos, frame_index, write_video

from vbench_async.frames import FrameError, FrameSpec, load_image
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.decoders import DECODERS, open_video
from vbench_async.frames.resize import resize_frames

# Small frames keep the resize cheap: floor 4 tokens, cap 48 tokens (factor 32).
SPEC = FrameSpec("qwen3-vl", max_frames=16, min_pixels=4 * 1024, max_pixels=48 * 1024)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clips")
    return {
        "short": write_video(d / "short.mp4", frames=300, fps=30),  # 10 s
        "long": write_video(d / "long.mp4", frames=1200, fps=24, gop=48),  # 50 s, keyframes every 2 s: seeks
        "portrait": write_video(d / "portrait.mp4", frames=40, fps=25, width=96, height=160),
        "one": write_video(d / "one.mp4", frames=1, fps=30),
        "three": write_video(d / "three.mp4", frames=3, fps=30),
    }


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@pytest.mark.parametrize("clip", ["short", "long", "portrait"])
def test_every_decoder_returns_exactly_the_sampled_source_frames(clips, decoder: str, clip: str) -> None:
    frames, meta = decode_video(clips[clip], SPEC, decoder=decoder)
    assert frames.dtype == np.uint8 and frames.shape == (meta.num_frames, meta.resized_height, meta.resized_width, 3)
    assert [frame_index(f) for f in frames] == list(meta.frames_indices)
    assert meta.decoder == decoder and meta.frames_indices[0] == 0
    assert meta.frames_indices[-1] == meta.source_total_frames - 1


def test_metadata_describes_the_source(clips) -> None:
    _, meta = decode_video(clips["long"], SPEC)
    assert (meta.fps, meta.total_num_frames, meta.source_total_frames) == (24.0, 1200, 1200)
    assert meta.duration == pytest.approx(50.0) and (meta.width, meta.height) == (160, 96)
    assert meta.num_frames == 16 and not meta.clamped  # 100 wanted at 2 fps, capped at 16
    assert meta.sample_fps == pytest.approx(16 / 1200 * 24)
    _, portrait = decode_video(clips["portrait"], SPEC)
    assert (portrait.width, portrait.height) == (96, 160) and portrait.resized_height > portrait.resized_width


def test_decoders_agree_on_pixels(clips) -> None:
    ref, _ = decode_video(clips["short"], SPEC, decoder="pyav")
    for name in DECODERS:
        other, _ = decode_video(clips["short"], SPEC, decoder=name)
        assert np.abs(other.astype(int) - ref).mean() < 3.0, name


def test_window_keeps_absolute_indices(clips) -> None:
    frames, meta = decode_video(clips["short"], SPEC, window=(2.5, 7.0))
    assert meta.window_frames == (75, 210) and meta.total_num_frames == 136
    assert list(meta.frames_indices) == [75, 94, 114, 133, 152, 171, 191, 210]
    assert [frame_index(f) for f in frames] == list(meta.frames_indices)
    with pytest.raises(FrameError) as err:
        decode_video(clips["short"], SPEC, window=(30.0, 40.0))
    assert err.value.kind == "window_invalid"


def test_one_frame_video_is_repeated_and_recorded(clips) -> None:
    frames, meta = decode_video(clips["one"], SPEC)
    assert frames.shape[0] == 2 and list(meta.frames_indices) == [0, 0]
    assert meta.clamped and meta.requested_frames == 4
    exact = FrameSpec("qwen2.5-vl", nframes=32, min_pixels=4 * 784, max_pixels=48 * 784)
    frames, meta = decode_video(clips["three"], exact)  # shorter than nframes: clamp, never raise
    assert list(meta.frames_indices) == [0, 2] and meta.requested_frames == 32 and meta.clamped


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_bad_files_raise_clear_frame_errors(tmp_path, decoder: str, clips) -> None:
    cases = {path: BROKEN_KINDS[name] for name, path in broken_videos(tmp_path).items()}
    cases[tmp_path] = "video_missing"  # a directory
    if decoder == "opencv":  # OpenCV cannot tell an audio-only file from a broken one
        cases[tmp_path / "audio.mp4"] = "decode_error"
    for path, kind in cases.items():
        with pytest.raises(FrameError) as err:
            decode_video(path, SPEC, decoder=decoder)
        assert err.value.kind == kind, (path.name, str(err.value))
        assert str(err.value) and "[Errno 1094995529]" not in str(err.value)  # a message a person can act on


def test_ffmpeg_error_codes_are_given_in_words(tmp_path) -> None:
    from vbench_async.frames.av_errors import in_words
    from vbench_async.workload.probe import probe_video

    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 16)  # a header, then noise
    with pytest.raises(FrameError) as err:
        probe_video(corrupt, "pyav")  # what `plan` and `data check` read: PyAV's own exception underneath
    text = str(err.value)
    assert isinstance(err.value.__cause__, ValueError) and "[Errno" in str(err.value.__cause__)
    assert "[Errno" not in text and "invalid data: the file is damaged" in text and "(FFmpeg INVALIDDATA)" in text
    assert "corrupt.mp4" in text
    assert in_words("[Errno 541478725] End of file") == "the file ended before the video did (cut short?) (FFmpeg EOF)"
    assert in_words("[Errno 2] No such file or directory: 'x.mp4'") == "[Errno 2] No such file or directory: 'x.mp4'"
    assert in_words("[Errno 12345678] Odd") == "an FFmpeg error with no name here (code 12345678)"


def test_seeking_reader_reports_a_short_stream(clips) -> None:
    video = open_video(clips["short"], "pyav")
    try:
        with pytest.raises(FrameError, match="stream ended"):
            list(video.read([10, 400]))  # frame 400 does not exist
    finally:
        video.close()


def test_resize_matches_torchvision_exactly() -> None:
    tv = pytest.importorskip("torchvision.transforms.functional")
    import torch
    from torchvision.transforms import InterpolationMode

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (3, 90, 160, 3), dtype=np.uint8)
    for height, width in [(64, 96), (96, 160), (192, 352)]:  # down, equal height, up
        ours = resize_frames(frames, height, width)
        ref = tv.resize(
            torch.from_numpy(frames).permute(0, 3, 1, 2), [height, width], InterpolationMode.BICUBIC, antialias=True
        )
        assert np.array_equal(ours, ref.permute(0, 2, 3, 1).numpy())


def test_load_image_uses_the_image_budget(tmp_path) -> None:
    from PIL import Image

    path = tmp_path / "img.png"
    Image.fromarray(np.full((20, 30, 4), 200, np.uint8), "RGBA").save(path)
    image = load_image(path, "qwen2.5-vl")
    # 30x20 is below the 3136 px image floor: beta = sqrt(3136/600) = 2.29; ceil(1.63), ceil(2.45) sides of 28
    assert image.shape == (56, 84, 3) and image.dtype == np.uint8
    assert (image == 212).all()  # grey 200 at alpha 200/255 over white: 200*200/255 + 55 = 212
    with pytest.raises(FrameError) as err:
        load_image(tmp_path / "none.png", "qwen2.5-vl")
    assert err.value.kind == "video_missing"
    (tmp_path / "bad.png").write_text("nope")
    with pytest.raises(FrameError, match="cannot read image"):
        load_image(tmp_path / "bad.png", SPEC)
