"""One frame-settings record (`FrameSettings`): the command line of `run`, `plan` and `preprocess`, a card's `frames:`
and presets, a server job and training's frame settings all read it, with one set of bounds; and the second resize
Qwen3-VL's own evaluation leaves to the engine's video processor, checked against that processor itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.videos import write_video

from vbench_async import cli
from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.cards import FRAME_KEYS, parse_card
from vbench_async.cli.run_options import config_from_args
from vbench_async.errors import UserError
from vbench_async.evaluation.run_config import RunConfig
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.frame_settings import FrameSettings
from vbench_async.frames.spec import FrameSpec, resolve_frame_spec
from vbench_async.models import family_ref
from vbench_async.serve.jobs import JobSpec

MINIMAL = {"id": "x", "name": "X", "sources": {"unified": {"annotation": "x.json", "video_dir": "X"}},
           "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy"}
QWEN3_VL_8B_LONGEST_EDGE = 25_165_824  # Qwen3-VL-8B's video_preprocessor_config.json size.longest_edge
# The Qwen3-VL repository's evaluation/VideoMME/run_videomme.py defaults (docs: model-protocols).
QWEN3_SCRIPT = {"fps": 2.0, "min_frames": 4, "max_frames": 512, "min_pixels": 128 * 28 * 28,
                "max_pixels": 512 * 28 * 28, "total_pixels": 24576 * 28 * 28}


def _processor(longest_edge: int):
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    return Qwen3VLVideoProcessor(size={"shortest_edge": 4096, "longest_edge": longest_edge}, patch_size=16,
                                 merge_size=2, temporal_patch_size=2)


@pytest.mark.parametrize("frames, source, settings, cap", [
    (16, (720, 1280), {"max_pixels": 131072}, 600_000),
    (64, (720, 1280), {"max_pixels": 131072}, QWEN3_VL_8B_LONGEST_EDGE // 8),
    (24, (480, 854), {}, 2_000_000),
    (8, (96, 160), {}, 10**9),  # under the cap: no second resize
])
def test_second_resize_is_what_the_qwen3_vl_video_processor_does(frames, source, settings, cap) -> None:
    """The frames the cache hands over after the first resize, given to transformers' Qwen3-VL video processor with
    do_resize left on (as vLLM gets them from Qwen3-VL's own evaluation): its output grid is the size the spec plans."""
    spec = FrameSpec("qwen3-vl", second_resize_max_pixels=cap, **settings)
    first = spec.resize_steps(*source, frames)[0]
    video = np.random.default_rng(0).integers(0, 256, (frames, *first, 3), dtype=np.uint8)
    grid = _processor(cap)(videos=[video], do_sample_frames=False, do_resize=True, return_tensors="pt")
    t, h, w = (int(x) for x in grid["video_grid_thw"][0])
    assert (t * 2, h * 16, w * 16) == (frames, *spec.frame_size(*source, frames))


def test_a_720p_video_at_512_frames_reaches_qwen3_vl_8b_at_160x288() -> None:
    """The issue's numbers: Qwen3-VL's Video-MME settings on a 720p video at 512 frames give 160x288 frames after the
    processor's second resize; the project's Video-MME card at 256 frames, 384x672 resized again to 224x384. Each
    second size is transformers' own smart_resize on the first."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import smart_resize

    for settings, n, want in ((QWEN3_SCRIPT, 512, (160, 288)), (dict(get_benchmark("videomme").card.frames.to_dict()),
                                                                  256, (224, 384))):
        plain = FrameSpec("qwen3-vl", **settings)
        twice = FrameSpec("qwen3-vl", **settings, second_resize_max_pixels=QWEN3_VL_8B_LONGEST_EDGE)
        first = plain.frame_size(720, 1280, n)
        assert twice.resize_steps(720, 1280, n) == (first, want)
        assert smart_resize(n, *first, temporal_factor=2, factor=32, min_pixels=4096,
                            max_pixels=QWEN3_VL_8B_LONGEST_EDGE) == want
    assert FrameSpec("qwen3-vl", **dict(get_benchmark("videomme").card.frames.to_dict())).frame_size(
        720, 1280, 256) == (384, 672)


def test_without_the_setting_nothing_changes() -> None:
    """Off by default: the same config (result hashes) and cache keys as before the setting existed."""
    spec = FrameSpec("qwen3-vl")
    assert "second_resize_max_pixels" not in spec.to_dict() and "second_resize_max_pixels" not in spec.key_fields()
    assert spec.resize_steps(720, 1280, 32) == (spec.frame_size(720, 1280, 32),)
    twice = FrameSpec("qwen3-vl", second_resize_max_pixels=1 << 22)
    assert twice.key_fields() != spec.key_fields() and twice.to_dict()["second_resize_max_pixels"] == 1 << 22
    with pytest.raises(ValueError, match="fixed side"):
        FrameSpec("internvl", second_resize_max_pixels=1 << 22)


def test_filled_in_defaults_round_trip_beyond_the_user_caps() -> None:
    """The caps bound what a user asks for; a fixed-size family's filled-in pixel defaults exceed them (768 tokens of
    448 x 448 pixels) and a spec still travels to a decode worker and back (to_dict / from_dict)."""
    spec = FrameSpec("internvl")
    assert spec.max_pixels > FrameSettings.__dataclass_fields__["max_pixels"].metadata["max"]
    assert FrameSpec.from_dict(spec.to_dict()) == spec


def test_decoded_frames_are_resized_twice(tmp_path) -> None:
    video = write_video(tmp_path / "v.mp4", frames=20, width=320, height=192)
    spec = FrameSpec("qwen3-vl", nframes=8, second_resize_max_pixels=8 * 96 * 160)
    frames, meta = decode_video(video, spec)
    assert spec.resize_steps(192, 320, 8) == ((288, 480), (96, 160))  # up to the per-frame floor, then down
    assert frames.shape == (8, 96, 160, 3) and (meta.resized_height, meta.resized_width) == (96, 160)
    assert meta.spec["second_resize_max_pixels"] == 8 * 96 * 160


# -- one record, one set of bounds ---------------------------------------------------------------------------------

NEW = {"min_pixels": 65536, "min_frames": 8, "second_resize_max_pixels": QWEN3_VL_8B_LONGEST_EDGE}


def _flags(values: dict) -> list[str]:
    return [a for k, v in values.items() for a in (f"--{k.replace('_', '-')}", str(v))]


@pytest.mark.parametrize("command", ["run", "plan"])
def test_new_settings_reach_the_frames_from_the_command_line(command) -> None:
    args = cli.build_parser(command).parse_args([command, "--model", "m", "--benchmarks", "demo-mc", *_flags(NEW)])
    cfg = config_from_args(args)
    assert cfg.frame_overrides == FrameSettings(**NEW)
    spec = get_benchmark("demo-mc").frame_spec(family_ref("qwen3-vl"), cfg.frame_overrides)
    assert (spec.min_pixels, spec.min_frames, spec.second_resize_max_pixels) == tuple(NEW.values())
    assert RunConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg  # a job's / training's JSON form


def test_new_settings_from_a_card_a_preset_a_job_and_training() -> None:
    assert set(NEW) <= FRAME_KEYS and "side" not in FRAME_KEYS  # the checkpoint decides a fixed side
    card = parse_card({**MINIMAL, "frames": NEW, "presets": {"lo": {"min_frames": 2}}}, Path("x.yaml"))
    assert card.frames == FrameSettings(**NEW)
    job = JobSpec.from_json({"selection": {"suite": "demo"}, "frame_overrides": NEW})
    assert job.run_config(RunConfig(model="m")).frame_overrides == FrameSettings(**NEW)
    spec = resolve_frame_spec("qwen3-vl", {}, {}, NEW, "data.frames")  # training's data.frames (train/data.py)
    assert spec.second_resize_max_pixels == QWEN3_VL_8B_LONGEST_EDGE


@pytest.mark.parametrize("name, value, why", [
    ("min_frames", 5000, "must be at least 1 and at most 4096, not 5000"),
    ("min_pixels", 0, "must be at least 1 and at most 67108864, not 0"),
    ("second_resize_max_pixels", 0, "must be at least 1 and at most 17179869184, not 0"),
    ("fps", 0.0, "must be more than 0 and at most 1000, not 0.0"),
    ("max_frames", 4097, "must be at least 1 and at most 4096, not 4097"),
])
def test_a_bad_value_is_refused_alike_everywhere(name, value, why, capsys) -> None:
    """One declaration, one check: the flag, a card's frames and presets, a server job and training's frame settings
    refuse the same value with the same words."""
    with pytest.raises(SystemExit):
        cli.build_parser("run").parse_args(["run", "--model", "m", "--suite", "demo", *_flags({name: value})])
    assert why in capsys.readouterr().err
    for where, call in [
        ("card", lambda: parse_card({**MINIMAL, "frames": {name: value}}, Path("x.yaml"))),
        ("preset", lambda: parse_card({**MINIMAL, "presets": {"p": {name: value}}}, Path("x.yaml"))),
        ("job", lambda: JobSpec.from_json({"selection": {"suite": "demo"}, "frame_overrides": {name: value}})),
        ("training", lambda: resolve_frame_spec("qwen3-vl", {}, {}, {name: value}, "data.frames")),
    ]:
        with pytest.raises(UserError) as err:
            call()
        assert f"{name} {why}" in str(err.value), where
