"""Sampling parity: frame counts, indices and resized sizes against values worked out by hand from the Qwen rules.

Qwen3-VL (factor 32): frames = floor_even(min(max(total/fps*2, 4), floor_even(max_frames), total)); per-frame cap =
min(max_pixels, max(min(768*32^2, total_pixels/n*2), int(1.05*min_pixels))); smart_resize rounds sides to the
factor (Python round, half to even) and floors/ceils when outside the budget. Qwen2.5-VL: exact nframes rounded to
even, factor 28. Comments show the arithmetic.
"""

from __future__ import annotations

import json

import pytest

from vbench_async.frames import FrameError, FrameSpec
from vbench_async.frames.spec import frame_range, linspace_indices, normalize_window, smart_resize

Q3 = FrameSpec("qwen3-vl")
Q25 = FrameSpec("qwen2.5-vl")


@pytest.mark.parametrize(
    "spec, total, fps, n, requested",
    [
        (Q3, 300, 30.0, 20, 20),  # 10 s: 300/30*2 = 20
        (Q3, 1800, 30.0, 32, 32),  # 60 s: 120 capped at max_frames 32
        (FrameSpec("qwen3-vl", max_frames=256), 15000, 25.0, 256, 256),  # 600 s: 1200 -> 256
        (FrameSpec("qwen3-vl", max_frames=33), 1800, 30.0, 32, 32),  # odd cap floors to even
        (Q3, 45, 30.0, 4, 4),  # 1.5 s: 3 -> raised to min_frames 4
        (Q3, 165, 30.0, 10, 10),  # 5.5 s: 11 -> floor_even 10
        (Q3, 210, 29.97, 14, 14),  # 7 s at 29.97: 14.01 -> 14
        (FrameSpec("qwen3-vl", min_frames=5), 30, 30.0, 6, 6),  # min_frames ceils to even: 6
        (FrameSpec("qwen3-vl", fps=1.0, max_frames=64), 2400, 24.0, 64, 64),  # 100 s at 1 fps -> 100 -> 64
        (Q3, 3, 30.0, 2, 4),  # shorter than min_frames: capped at floor_even(3) = 2, clamped
        (Q3, 1, 30.0, 2, 4),  # 1 frame: the reference raises; we repeat it once (clamped)
        (FrameSpec("qwen2.5-vl", nframes=16), 300, 30.0, 16, 16),
        (FrameSpec("qwen2.5-vl", nframes=15), 300, 30.0, 16, 16),  # round(7.5) = 8 -> 16
        (FrameSpec("qwen2.5-vl", nframes=13), 300, 30.0, 12, 12),  # round(6.5) = 6 (half to even) -> 12
        (FrameSpec("qwen2.5-vl", nframes=64), 40, 30.0, 40, 64),  # shorter than nframes: clamp, never raise
        (FrameSpec("qwen2.5-vl", nframes=64), 41, 30.0, 40, 64),  # ... to an even count
        (FrameSpec("qwen2.5-vl", nframes=8), 1, 25.0, 2, 8),
    ],
)
def test_frame_counts(spec: FrameSpec, total: int, fps: float, n: int, requested: int) -> None:
    plan = spec.frame_count(total, fps)
    assert (plan.n, plan.requested) == (n, requested)
    assert plan.clamped == (n < requested)


@pytest.mark.parametrize(
    "first, last, n, expected",
    [
        (0, 9, 4, [0, 3, 6, 9]),
        (0, 5, 3, [0, 2, 5]),  # 2.5 rounds half to even
        (0, 7, 3, [0, 4, 7]),  # 3.5 -> 4
        (0, 0, 2, [0, 0]),  # 1-frame video: the frame twice
        (0, 299, 16, [0, 20, 40, 60, 80, 100, 120, 140, 159, 179, 199, 219, 239, 259, 279, 299]),  # step 19.93
        (75, 210, 8, [75, 94, 114, 133, 152, 171, 191, 210]),  # step 19.29
    ],
)
def test_indices(first: int, last: int, n: int, expected: list[int]) -> None:
    assert linspace_indices(first, last, n) == expected


@pytest.mark.parametrize(
    "window, expected",
    [
        (None, (0, 299, 300)),
        ((2.5, 7.0), (75, 210, 136)),  # ceil(2.5*30), floor(7*30)
        ((None, 4.0), (0, 120, 121)),
        ((8.0, 99.0), (240, 299, 60)),  # end beyond the video is clamped to it
        ((9.95, None), (299, 299, 1)),  # ceil(298.5) = 299: one frame (the reference would raise)
    ],
)
def test_window_range(window, expected) -> None:
    assert frame_range(300, 30.0, window) == expected


def test_window_beyond_the_video_is_a_clear_failure() -> None:
    with pytest.raises(FrameError) as err:
        frame_range(300, 30.0, (12.0, None))
    assert err.value.kind == "window_invalid" and "10.00 s video" in str(err.value)
    with pytest.raises(FrameError):
        normalize_window((5.0, 3.0))
    assert normalize_window((0, None)) is None and normalize_window((None, None)) is None
    assert normalize_window((1, 2)) == (1.0, 2.0)


@pytest.mark.parametrize(
    "spec, height, width, n, expected",
    [
        # 1280x720, cap min(262144, max(min(786432, 33554432/256*2 = 262144), 137625)): beta 1.875 -> 384x672
        (FrameSpec("qwen3-vl", max_pixels=262144, total_pixels=33554432), 720, 1280, 256, (384, 672)),
        # 1024 frames: 33554432/1024*2 = 65536 < floor 137625 -> cap 137625, beta 2.588 -> 256x480
        (FrameSpec("qwen3-vl", max_pixels=262144, total_pixels=33554432), 720, 1280, 1024, (256, 480)),
        # 2048 frames, budget 164225024: cap 160375.02, beta 2.397 -> 288x512
        (FrameSpec("qwen3-vl", max_pixels=655360, total_pixels=164225024), 720, 1280, 2048, (288, 512)),
        # Qwen2.5 at max_pixels 262144: 728x1288 rounded, beta 1.875 -> floor to 28: 364x672
        (FrameSpec("qwen2.5-vl", max_pixels=262144), 720, 1280, 256, (364, 672)),
        # Qwen2.5 defaults: cap min(602112, 90316800/256*2) = 602112, beta 1.2372 -> 560x1008
        (Q25, 720, 1280, 256, (560, 1008)),
        # portrait 1080x1920: cap 786432, beta 1.6238 -> 1152x640
        (Q3, 1920, 1080, 32, (1152, 640)),
        # 4K: round(67.5) = 68 first, over the cap, beta 3.2476 -> 640x1152
        (Q3, 2160, 3840, 32, (640, 1152)),
        # tiny 64x48: below the 131072 floor, beta 6.532, ceil -> 320x448
        (Q3, 48, 64, 32, (320, 448)),
        # already a multiple of the factor and inside the budget: unchanged
        (Q3, 352, 640, 32, (352, 640)),
    ],
)
def test_resized_sizes(spec: FrameSpec, height: int, width: int, n: int, expected: tuple[int, int]) -> None:
    h, w = spec.frame_size(height, width, n)
    assert (h, w) == expected
    assert h % spec.factor == 0 and w % spec.factor == 0


def test_image_budgets_are_independent_of_video_budgets() -> None:
    spec = FrameSpec("qwen2.5-vl", max_pixels=65536)
    assert spec.image_size(720, 1280) == (728, 1288)  # image max 16384*28^2: only rounded
    assert spec.image_size(20, 20) == (56, 56)  # image floor 4*28^2 = 3136: beta 2.8, ceil
    assert spec.frame_size(720, 1280, 8) != spec.image_size(720, 1280)


def test_extreme_aspect_ratio_is_a_frame_error() -> None:
    with pytest.raises(FrameError) as err:
        smart_resize(10, 2010, 32, 4096, 65536)
    assert err.value.kind == "aspect_ratio"


def test_low_max_pixels_lowers_the_floor() -> None:
    spec = FrameSpec("qwen3-vl", max_pixels=65536)  # below the 131072 default floor
    assert spec.min_pixels == 65536 and spec.frame_cap(32) == 65536
    with pytest.raises(ValueError, match="below min_pixels"):
        FrameSpec("qwen3-vl", min_pixels=100000, max_pixels=65536)


def test_spec_round_trips_through_json_and_is_hashable() -> None:
    spec = FrameSpec("Qwen2_5_VL", fps=1, nframes=64, total_pixels=1 << 24)
    again = FrameSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and hash(again) == hash(spec) and again.family == "qwen2.5-vl"
    assert {spec: 1}[again] == 1
    with pytest.raises(ValueError, match="unknown FrameSpec field"):
        FrameSpec.from_dict({"family": "qwen3-vl", "fsp": 2})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"family": "llava"}, "unknown model family"),
        ({"family": "qwen3-vl", "fps": 0}, "fps"),
        ({"family": "qwen3-vl", "max_frames": 1}, "max_frames"),
        ({"family": "qwen3-vl", "nframes": 1}, "nframes"),
        ({"family": "qwen3-vl", "max_pixels": -5}, "max_pixels"),
    ],
)
def test_bad_specs_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FrameSpec(**kwargs)


def test_key_fields_name_only_what_changes_frames() -> None:
    assert FrameSpec("qwen2-vl").key_fields() == FrameSpec("qwen2.5-vl").key_fields()  # same factor, same rules
    assert FrameSpec("qwen3-vl").key_fields() != FrameSpec("qwen2.5-vl").key_fields()
    exact = FrameSpec("qwen3-vl", nframes=16)
    assert exact.key_fields() == FrameSpec("qwen3-vl", nframes=16, fps=1.0, max_frames=8).key_fields()
    assert FrameSpec("qwen3-vl", image_max_pixels=4096 * 4).key_fields() == FrameSpec("qwen3-vl").key_fields()
