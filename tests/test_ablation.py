"""Input ablations (`run --ablation`): what each one does to the frames and their metadata; an unknown one is refused.
That an ablated run reaches the backend as its own run (own result file, each line saying what the model got), on
one engine with the real run, and what it does to a model that sees: tests/test_seeing_model.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_cli

from vbench_async.backends.base import VideoInput
from vbench_async.frames.ablation import ABLATIONS, ablate, ablate_frames

META = {"fps": 25.0, "duration": 8.0, "total_num_frames": 200, "frames_indices": [0, 25, 50, 75, 100, 125],
        "width": 64, "height": 48, "video_backend": "pyav"}


def frames(n: int = 6) -> np.ndarray:
    return np.stack([np.full((4, 6, 3), 10 * (i + 1), dtype=np.uint8) for i in range(n)])


def test_blank_takes_every_pixel_and_keeps_the_timing():
    out, meta = ablate_frames(frames(), META, "blank", "k")
    assert out.shape == frames().shape and not out.any() and meta == META


def test_shuffle_and_reverse_reorder_the_frames_and_keep_their_timestamps():
    f = frames()
    shuffled, meta = ablate_frames(f, META, "shuffle", "key-a")
    order = [int(x[0, 0, 0]) // 10 - 1 for x in shuffled]
    assert sorted(order) == list(range(6)) and order != list(range(6)) and meta == META
    assert (ablate_frames(f, META, "shuffle", "key-a")[0] == shuffled).all()  # fixed per video
    reversed_, meta = ablate_frames(f, META, "reverse", "k")
    assert (reversed_ == f[::-1]).all() and meta == META
    two = frames(2)
    assert not (ablate_frames(two, META, "shuffle", "any")[0] == two).all()  # never the identity


def test_fps_and_timestamps_change_only_the_timing():
    f = frames()
    same, meta = ablate_frames(f, META, "fps", "k")
    assert (same == f).all() and meta["fps"] == 50.0 and meta["duration"] == 4.0
    assert meta["frames_indices"] == META["frames_indices"]
    same, meta = ablate_frames(f, META, "timestamps", "k")
    assert (same == f).all() and meta["frames_indices"] == list(range(6)) and meta["fps"] == 25.0


def test_an_ablated_video_gets_its_own_uuid_and_an_unknown_kind_is_refused():
    video = VideoInput(frames=frames(), metadata=dict(META), uuid="entry")
    assert ablate(video, None) is video
    for kind in ABLATIONS:
        assert ablate(video, kind).uuid == f"entry:ablation-{kind}"  # an engine's cache never serves the real ones
    with pytest.raises(ValueError, match="unknown ablation"):
        ablate(video, "upside-down")


def test_an_unknown_ablation_is_refused_before_any_work(tmp_path):
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-yesno", "--ablation", "none,sideways",
                   "--output-dir", str(tmp_path / "run"))
    assert proc.returncode == 2 and "unknown ablation sideways" in proc.stderr
    assert not (tmp_path / "run").exists()
