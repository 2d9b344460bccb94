"""The model-family registry: every family declares a cited reference, a tiny recipe and rules that the checks in
tests/support/family_checks.py (written from the references) confirm; frames from the real cache reach the real
transformers processor with exactly the token count the planner predicts. No engine starts here: the vLLM and HF runs
of every family are in tests/test_families_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.family_checks import FRAMES_SEEN, REFERENCE_INDICES
from support.videos import write_video

from vbench_async import families, models
from vbench_async.backends.base import chat_messages
from vbench_async.benchmarks import get_benchmark
from vbench_async.demo.tiny_models import TINY_MODELS, ensure_tiny_model
from vbench_async.errors import UserError
from vbench_async.frames import FrameCache, FrameSpec
from vbench_async.workload.tokens import PromptCounter, VideoGeometry

FAMILIES = families.names()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("name", FAMILIES)
def test_family_declares_reference_recipe_and_checks(name: str) -> None:
    fam = families.get(name)
    ref = fam.reference
    assert ref.source in ("model card", "authors' evaluation code") and ref.url.startswith("https://") and ref.follows
    assert fam.tiny_model in TINY_MODELS, f"{name} has no tiny recipe"
    assert name in REFERENCE_INDICES and name in FRAMES_SEEN, f"{name} has no frame/token check"
    assert fam.model_types and callable(fam.visual_tokens) and callable(fam.frames.pick)
    assert fam.frames.resize in ("smart", "fixed") and fam.frames.temporal >= 1
    described = fam.describe()
    assert described["reference"]["url"] == ref.url and described["frames"]["selection"]


def test_at_least_six_families_and_unique_model_types() -> None:
    types = [t for f in families.registry().values() for t in f.model_types]
    assert len(FAMILIES) >= 6 and len(types) == len(set(types))
    assert {"internvl", "llava-onevision", "glm-4.1v"} <= set(FAMILIES)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("first,last,n", [(0, 299, 8), (0, 299, 20), (45, 180, 6), (0, 9, 10), (0, 1, 2),
                                          (17, 1017, 32)])
def test_selection_matches_the_reference(name: str, first: int, last: int, n: int) -> None:
    spec = FrameSpec(family=name)
    got = spec.indices(first, last, n)
    assert got == REFERENCE_INDICES[name](first, last, n)
    assert len(got) == n and all(first <= i <= last for i in got)


@pytest.mark.parametrize("name", FAMILIES)
def test_frame_count_is_a_multiple_of_the_temporal_patch(name: str) -> None:
    spec = FrameSpec(family=name, fps=2.0, max_frames=32)
    t = families.get(name).frames.temporal
    for total, fps in ((300, 30.0), (31, 10.0), (7, 2.0), (1, 1.0)):
        n = spec.frame_count(total, fps).n
        assert n % t == 0 and t <= n <= 32
    assert FrameSpec(family=name, nframes=7 if t == 1 else 8).frame_count(300, 30.0).n == (7 if t == 1 else 8)


def test_qwen_cache_keys_are_unchanged_and_families_differ() -> None:
    qwen = FrameSpec(family="qwen2.5-vl", fps=2.0, max_frames=32).key_fields()
    assert set(qwen) == {"factor", "nframes", "fps", "min_frames", "max_frames", "min_pixels", "max_pixels",
                         "total_pixels"}
    assert "side" not in FrameSpec(family="qwen3-vl").to_dict()  # Qwen run configs (config hashes) unchanged
    assert FrameSpec.from_dict(FrameSpec(family="internvl", side=112).to_dict()).side == 112
    intern = FrameSpec(family="internvl", side=112).key_fields()
    llava = FrameSpec(family="llava-onevision", side=112).key_fields()
    assert intern["side"] == 112 and intern["temporal"] == 1 and intern != llava  # selection rules differ
    assert FrameSpec(family="internvl").side == 448 and FrameSpec(family="llava-onevision").side == 384
    with pytest.raises(ValueError, match="fixed-size"):
        FrameSpec(family="qwen3-vl", side=112)
    with pytest.raises(ValueError, match="unknown model family"):
        FrameSpec(family="llava-1.5")


def _config_dir(tmp_path: Path, config: dict) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_resolution_comes_from_the_checkpoint_config_not_the_name(tmp_path: Path) -> None:
    # Named like a Qwen model, configured as InternVL with 336 px tiles: the config decides both.
    d = _config_dir(tmp_path / "Qwen2.5-VL-7B", {"model_type": "internvl", "vision_config": {"image_size": [336, 336]}})
    ref = models.resolve(str(d))
    assert ref.family == "internvl" and dict(ref.frame_settings) == {"side": 336}
    spec = get_benchmark("demo-mc").frame_spec(ref, {"max_frames": 16, "fps": None})  # checkpoint's side, then flags
    assert (spec.family, spec.side, spec.max_frames) == ("internvl", 336, 16)
    llava = models.resolve(str(_config_dir(tmp_path / "lo", {"model_type": "llava_onevision",
                                                                "vision_config": {"image_size": 384}})))
    assert llava.family == "llava-onevision" and dict(llava.frame_settings) == {"side": 384}
    with pytest.raises(UserError, match="image_size"):
        models.resolve(str(_config_dir(tmp_path / "bad", {"model_type": "internvl", "vision_config": {}})))
    with pytest.raises(UserError, match="not supported"):
        models.resolve(str(_config_dir(tmp_path / "other", {"model_type": "llava"})))


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("fam") / "clip.mp4", frames=75, fps=25, width=160, height=96)


@pytest.mark.parametrize("tiny", [f.tiny_model for f in families.registry().values()
                                  if not f.name.startswith("qwen")])
def test_cached_frames_through_the_processor_match_the_rules(tiny: str, clip: Path, tmp_path: Path) -> None:
    """The family's spec (side from the tiny config) on a real mp4 via the real cache; the real processor with the
    family's hand-off sees exactly those frames, and its prompt length is the planner's count."""
    ref = models.resolve(str(ensure_tiny_model(tiny)))
    fam = families.get(ref.family)
    spec = FrameSpec(family=ref.family, fps=2.0, max_frames=8, max_pixels=65536, **dict(ref.frame_settings))
    with FrameCache(tmp_path / "cache", workers=1) as cache:
        video = cache.get_or_decode(clip, spec)
    n = len(video.frames)
    assert list(video.meta.frames_indices) == REFERENCE_INDICES[ref.family](0, 74, n)
    if fam.frames.resize == "fixed":
        assert video.frames.shape[1:3] == (spec.side, spec.side) == (112, 112)
    counter = PromptCounter(ref.path, ref.family)
    processor = counter.processor
    text = processor.apply_chat_template(chat_messages("What moves?", 1), tokenize=False, add_generation_prompt=True)
    batch = processor(text=[text], videos=[video.frames], video_metadata=[video.hf_metadata()], return_tensors="pt",
                      **fam.handoff.hf_processor_kwargs)
    assert FRAMES_SEEN[ref.family](batch) == n
    shape = VideoGeometry(frames=n, height=video.frames.shape[1], width=video.frames.shape[2],
                          indices=tuple(video.meta.frames_indices), fps=video.meta.fps)
    counted = counter.count("What moves?", [shape])
    assert counted.prompt_tokens == batch["input_ids"].shape[1]
    assert 0 < counted.visual_tokens < counted.prompt_tokens
    # A still image (no video in the request: the processor resizes or tiles it itself) is counted as well.
    image = video.frames[0][:90, :150]
    text = processor.apply_chat_template(chat_messages("What is shown?", 0, 1), tokenize=False,
                                         add_generation_prompt=True)
    batch = processor(text=[text], images=[image], return_tensors="pt")
    assert counter.count("What is shown?", [], [image.shape[:2]]).prompt_tokens == batch["input_ids"].shape[1]


def test_list_models_shows_every_family_its_rules_and_reference(capsys: pytest.CaptureFixture) -> None:
    from vbench_async.cli import main

    assert main(["list", "--models", "--json"]) == 0
    shown = {r["family"]: r for r in json.loads(capsys.readouterr().out)["families"]}
    assert list(shown) == FAMILIES
    for name, row in shown.items():
        assert row["reference"]["url"] == families.get(name).reference.url
        assert row["frames"]["selection"] and row["frames"]["resolution"] and row["tiny_model"] in TINY_MODELS
    assert main(["list", "--models"]) == 0
    text = capsys.readouterr().out
    assert all(f"{name}  (model_type" in text for name in FAMILIES) and text.count("\n  reference ") == len(FAMILIES)
