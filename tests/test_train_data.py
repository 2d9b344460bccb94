"""Training data: records -> items through the evaluation adapters, resumable order, rank shares, cached media."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vbench_async.backends.base import SamplingParams
from vbench_async.errors import UserError
from vbench_async.frames.frame_settings import FrameSettings
from vbench_async.models import family_ref
from vbench_async.train.config import DataConfig
from vbench_async.train.data import DataOrder, MediaSource, frame_spec, load_items, rank_slice

FRAMES = {"max_frames": 4, "min_pixels": 3136, "max_pixels": 3136}


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    from vbench_async.demo.suite import generate_suite

    root = tmp_path_factory.mktemp("suite")
    generate_suite(root, n_videos=2, questions_per_video=2, min_s=2.0, max_s=3.0, workers=1)
    return root


def _records(suite: Path) -> Path:
    recs = json.loads((suite / "annotations" / "mc.json").read_text())
    recs[0]["offline_response"] = "<answer>B</answer>"
    recs.append({"problem_id": "t1", "problem": "Which letter follows A?", "problem_type": "multiple choice",
                 "options": ["A. Z", "B. B"], "solution": "<answer>B</answer>",
                 "offline_output": "B", "has_offline_trajectory": True})
    recs.append({"problem_id": "bad-type", "problem": "?", "problem_type": "interpretive dance", "solution": "x"})
    recs.append({"problem_id": "escape", "problem": "?", "problem_type": "yes/no", "solution": "<answer>Yes</answer>",
                 "path": "../outside.mp4"})
    path = suite / "train.json"
    path.write_text(json.dumps(recs))
    return path


def test_records_become_items_with_prompts_media_and_offline_responses(suite):
    path = _records(suite)
    items = load_items(DataConfig(records=str(path), video_dir=str(suite / "videos"),
                                  prompt_template="multiple_choice"))
    assert [it.index for it in items] == list(range(len(items)))
    ids = [it.sample.sample_id for it in items]
    assert "bad-type" not in ids and "escape" not in ids  # unknown task type, path escaping the root: skipped
    video_item = items[0]
    assert video_item.video == suite / "videos" / video_item.sample.video and video_item.video.is_file()
    assert video_item.modality == "video" and video_item.offline == ("<answer>B</answer>",)
    assert "Respond with only the letter" in video_item.prompt and video_item.sample.options[0] in video_item.prompt
    text_item = items[-1]
    assert text_item.modality == "text" and text_item.offline == ("B",)  # the predecessor's field names
    plain = load_items(DataConfig(records=str(path), video_dir=str(suite / "videos")))
    assert plain[-1].prompt == "Which letter follows A?\nA. Z\nB. B"


def test_benchmark_mode_uses_the_card_prompt(suite, tmp_path):
    from vbench_async.benchmarks import get_benchmark

    datamap = tmp_path / "data.yaml"
    datamap.write_text(f"benchmarks:\n  mvbench: {{annotation: {suite / 'annotations' / 'mc.json'}, "
                       f"video_dir: {suite / 'videos'}}}\n")
    items = load_items(DataConfig(benchmark="mvbench", data_root=str(datamap)))
    bench = get_benchmark("mvbench")
    assert items and all(it.prompt == bench.render_prompt(it.sample) for it in items)
    assert all(it.video.is_file() for it in items)


def test_no_usable_records_is_a_user_error(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([{"problem": "?", "problem_type": "nonsense", "solution": "x"}]))
    with pytest.raises(UserError, match="no usable training records"):
        load_items(DataConfig(records=str(path)))
    with pytest.raises(UserError, match="no such file"):
        load_items(DataConfig(records=str(tmp_path / "missing.json")))


def test_order_is_an_endless_seeded_stream_that_resumes_exactly():
    whole = DataOrder(5, seed=3).take(23)
    assert sorted(whole[:5]) == list(range(5)) and sorted(whole[5:10]) == list(range(5))  # every epoch: each once
    assert whole[:5] != whole[5:10] or whole[5:10] != whole[10:15]  # reshuffled per epoch
    chunked = DataOrder(5, seed=3)
    parts = [chunked.take(4) for _ in range(4)]
    resumed = DataOrder(5, seed=3, consumed=16)  # a restart knows only how much was consumed
    assert sum(parts, []) + resumed.take(7) == whole
    assert DataOrder(5, seed=3, shuffle=False).take(7) == [0, 1, 2, 3, 4, 0, 1]
    assert DataOrder(5, seed=4).take(5) != DataOrder(5, seed=3).take(5)


def test_rank_slices_cover_the_global_batch():
    batch = [7, 1, 4, 2, 9, 0]
    assert [rank_slice(batch, r, 3) for r in range(3)] == [[7, 1], [4, 2], [9, 0]]
    with pytest.raises(UserError, match="multiple of the number of processes"):
        rank_slice(batch, 0, 4)


def test_cached_frames_equal_live_decoding_and_are_not_decoded_at_train_time(suite, tmp_path):
    items = [it for it in load_items(DataConfig(records=str(_records(suite)), video_dir=str(suite / "videos")))
             if it.video]
    spec = frame_spec(DataConfig(records="x", frames=FRAMES), family_ref("qwen2.5-vl"))
    cached = MediaSource(spec, "cache", str(tmp_path / "cache"), workers=1)
    live = MediaSource(spec, "decode", str(tmp_path / "unused"))
    try:
        report = cached.prepare(items)
        assert report.failed == 0 and report.cached == len({it.video for it in items})
        a, b = cached.video(items[0]), live.video(items[0])
        assert cached.decoded == 0 and live.decoded == 1
        assert a.frames.shape[0] == 4 and a.frames.shape[1] % 28 == 0 and np.array_equal(a.frames, b.frames)
        assert a.metadata == b.metadata and a.metadata["frames_indices"] == sorted(a.metadata["frames_indices"])
        req = cached.request(items[0], SamplingParams(), n=3, request_id="r")
        assert req.n == 3 and req.videos[0].uuid == a.uuid and req.prompt == items[0].prompt
    finally:
        cached.close()
        live.close()


def test_a_fixed_side_family_rolls_out_with_the_frames_it_is_evaluated_with(tmp_path):
    """InternVL's frame side is the checkpoint's (the tiny model's 112 px, not the family's reference 448 px). An
    evaluation run records what the model received (`Result.frames`); the rollout of the same benchmark, as the
    trainer builds its media (`frame_spec(cfg.data, model)`), receives the same cache entry: the same source frames
    at the same size. Before, training left out the checkpoint's side and rolled out at 448 px."""
    from vbench_async import models
    from vbench_async.backends.sampling_overrides import SamplingOverrides
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.runner import RunConfig, run
    from vbench_async.results.result_file import read_results

    cache = tmp_path / "cache"
    model = models.resolve("tiny-internvl")
    cfg = RunConfig(model="tiny-internvl", backend="hf", output_dir=tmp_path / "run", cache_dir=cache,
                    selection=Selection(benchmarks=("demo-mc",), max_samples=1), progress=False,
                    sampling=SamplingOverrides(max_tokens=2), frame_overrides=FrameSettings(max_frames=4),
                    decode_workers=1)
    run(cfg)
    (line,) = [r for f in (tmp_path / "run" / "results").glob("*.jsonl") for r in read_results(f).values()]
    assert line.error is None and line.frames is not None

    data = DataConfig(benchmark="demo-mc", cache_dir=str(cache), max_samples=1, frames={"max_frames": 4})
    items = [it for it in load_items(data) if it.sample.sample_id == line.sample_id]
    media = MediaSource(frame_spec(data, model), "cache", str(cache), workers=1)
    try:
        video = media.video(items[0])
    finally:
        media.close()
    assert media.spec.side == dict(model.frame_settings)["side"] == 112
    assert media.decoded == 0 and video.uuid == line.frames["cache_key"]  # the evaluation's own cache entry
    assert list(video.metadata["frames_indices"]) == line.frames["indices"]
    assert list(video.frames.shape[1:3]) == line.frames["size"] == [112, 112]


def test_cache_preparation_is_split_by_decoding_cost_not_count(tmp_path):
    """One 300-frame video and six of 30 frames over 2 ranks: by count (3 and 4 videos) a rank could get the long one
    and three short ones; by cost the long one goes alone against the six short ones (300 vs 180 frames)."""
    from tests.support.videos import write_video
    from vbench_async.train.data import split_by_cost
    from vbench_async.train.headers import HeaderFile

    long = write_video(tmp_path / "a-long.mp4", frames=300, width=32, height=32)
    short = [write_video(tmp_path / f"b-short{i}.mp4", frames=30, width=32, height=32) for i in range(6)]
    missing = (str(tmp_path / "c-missing.mp4"), None)  # unreadable header: costs the median
    jobs = sorted([(str(long), None), *((str(p), None) for p in short), missing], key=str)
    probes = HeaderFile(tmp_path / "cache", "clips").headers([video for video, _ in jobs])
    owner = split_by_cost(jobs, 2, probes)
    assert owner == split_by_cost(jobs, 2, probes)  # the same on every rank
    long_rank = owner[0]
    assert [o for job, o in zip(jobs, owner) if o == long_rank] == [long_rank]  # the long video alone
    assert sum(1 for o in owner if o != long_rank) == 7
    # a window counts only its span: the long video cut to its first second costs as much as a short one
    windowed = sorted([(str(long), (0.0, 0.99)), *((str(p), None) for p in short)], key=str)
    assert sorted(split_by_cost(windowed, 2, probes).count(r) for r in (0, 1)) == [3, 4]


def test_headers_are_probed_once_per_data_set_and_again_for_a_changed_file(tmp_path):
    """A second launch reads the headers kept under the frame cache (no probe); a rewritten video (other size and
    modification time) and a new one are probed again, the others not."""
    import os

    from tests.support.videos import write_video
    from vbench_async.train.headers import HeaderFile

    clips = [str(write_video(tmp_path / f"clip{i}.mp4", frames=10 + 10 * i, width=32, height=32)) for i in range(3)]
    first = HeaderFile(tmp_path / "cache", "set")
    headers = first.headers(clips + [str(tmp_path / "missing.mp4")])
    assert first.probed == 4 and [headers[c].total_frames for c in clips] == [10, 20, 30]
    assert headers[str(tmp_path / "missing.mp4")] is None
    again = HeaderFile(tmp_path / "cache", "set")  # the next launch
    assert again.headers(clips) == {c: headers[c] for c in clips} and again.probed == 0
    write_video(tmp_path / "clip1.mp4", frames=50, width=32, height=32)
    os.utime(clips[1], ns=(1, 1))  # an mtime no earlier write had: the stamp changes even on a coarse clock
    clips.append(str(write_video(tmp_path / "clip3.mp4", frames=40, width=32, height=32)))
    third = HeaderFile(tmp_path / "cache", "set")
    changed = third.headers(clips)
    assert third.probed == 2 and [changed[c].total_frames for c in clips] == [10, 50, 30, 40]
    other = HeaderFile(tmp_path / "cache", "another-set")  # another data set: its own file
    other.headers(clips[:1])
    assert other.probed == 1 and len(list((tmp_path / "cache" / "probes").glob("train-*.json"))) == 2
