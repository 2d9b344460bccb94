"""Hostile and broken inputs, layer by layer and without an engine: every video case through the real frame cache
(decode worker included), every record case through the real loader, prompt renderer, path checks and scorer, every
damaged cache entry through the cache and `verify`, and the result store against torn or damaged files.

The same cases run end to end through `vbench-async run` with the real vLLM engine in test_reliability_hostile_run.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.hostile import (
    CACHE_CASES,
    CARD,
    IMAGE_CASES,
    RECORD_CASES,
    VIDEO_CASES,
    _good,
    _video,
    build_images,
    build_videos,
    stale_temp_file,
    write_data_map,
    write_records,
)

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.registry import safe_join
from vbench_async.errors import SampleError
from vbench_async.frames import FrameCache, FrameSpec, load_image
from vbench_async.frames.maintenance import gc_cache, verify_cache
from vbench_async.results.lines import read_lines
from vbench_async.results.result_file import ResultStore
from vbench_async.samples import Sample
from vbench_async.scoring import score

SPEC = FrameSpec("qwen2.5-vl", max_frames=4, max_pixels=16384)
# Kinds a decoder worker may report: recorded in the cache, so a later run does not decode that file again.
RECORDED_KINDS = {"decode_error", "no_video_stream", "aspect_ratio", "window_invalid", "video_empty"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> FrameCache:
    with FrameCache(tmp_path_factory.mktemp("cache"), timeout_s=60, workers=1) as c:
        yield c


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("hostile-videos")
    return root / "videos", build_videos(root / "videos", root / "outside")


# ----------------------------------------------------------------------------------------------- videos


# The 4 GiB one takes the decoders ~20 s to give up on: -m slow; the default suite has the same case at 256 MiB.
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.name == "sparse_4gib" else c
                                  for c in VIDEO_CASES], ids=lambda c: c.name)
def test_video_is_decoded_or_fails_with_a_recorded_reason(case, videos, cache):
    root, paths = videos
    try:
        path = safe_join(root, paths[case.name], False, "video")
        got = cache.get_or_decode(path, SPEC, case.window)
    except SampleError as exc:
        assert exc.kind in case.expect, f"{case.name}: {exc.kind}: {exc}"
        assert len(str(exc)) > 10, "the message must say what is wrong"
        if exc.kind in RECORDED_KINDS and path.is_file() and path.stat().st_size:
            # Decided by the decoder, so recorded: asking again answers from the record, without another decode.
            assert cache.failure(path, SPEC, case.window).kind == exc.kind
            before = cache.decodes
            with pytest.raises(SampleError) as again:
                cache.get_or_decode(path, SPEC, case.window)
            assert again.value.kind == exc.kind and cache.decodes == before
        return
    assert "ok" in case.expect, f"{case.name} decoded, expected {sorted(case.expect)}"
    t, h, w, c = got.frames.shape
    assert got.frames.dtype.name == "uint8" and c == 3 and 1 <= t <= 4 and h * w <= 16384 * 1.5
    assert got.meta.num_frames == t and got.meta.fps > 0


def test_paths_outside_the_root_are_accepted_only_when_allowed(videos, cache):
    root, paths = videos
    for name in ("symlink_out_of_root", "dotdot_path", "absolute_path"):
        with pytest.raises(SampleError) as refused:
            safe_join(root, paths[name], False, "video")
        assert refused.value.kind == "path_unsafe"
        allowed = safe_join(root, paths[name], True, "video")
        assert cache.get_or_decode(allowed, SPEC).frames.shape[0] >= 1, name


# ----------------------------------------------------------------------------------------------- images


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("hostile-images")
    return root, build_images(root)


@pytest.mark.parametrize("case", IMAGE_CASES, ids=lambda c: c.name)
def test_image_is_loaded_or_fails_with_a_stable_kind(case, images):
    root, files = images
    try:
        pixels = load_image(root / files[case.name], SPEC)
    except SampleError as exc:
        assert exc.kind in case.expect, f"{case.name}: {exc.kind}: {exc}"
        assert len(str(exc)) > 10
        return
    assert "ok" in case.expect, f"{case.name} loaded, expected {sorted(case.expect)}"
    assert pixels.dtype.name == "uint8" and pixels.ndim == 3 and pixels.shape[2] == 3
    assert pixels.shape[0] % SPEC.factor == 0 and pixels.shape[1] % SPEC.factor == 0


def test_a_16_bit_image_keeps_its_contrast(images):
    root, files = images
    pixels = load_image(root / files["grey_16_bit_png"], SPEC)
    assert pixels.std() > 40  # scaled to 8 bits, not clipped to white


# ----------------------------------------------------------------------------------------------- records


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[dict[str, object], dict[str, str]]:
    """Every record case through the real loader, renderer, path checks and scorer: result id -> case, outcome."""
    root = tmp_path_factory.mktemp("hostile-records")
    _video(root / "videos" / "good.mp4")
    ids = write_records(root / "hostile.jsonl", RECORD_CASES)
    data_map = write_data_map(root, "hostile.jsonl")
    bench = get_benchmark(CARD)
    outcome: dict[str, str] = {}
    for item in bench.load_samples(data_map):
        if isinstance(item, SampleError):
            outcome[item.sample_id] = item.kind
            continue
        try:
            bench.render_prompt(item)
            bench.video_path(item, data_map)
            bench.image_paths(item, data_map)
            score(item, "<answer>A</answer>")  # what the pipeline does with the engine's answer
            outcome[item.sample_id] = "ok"
        except SampleError as exc:
            outcome[item.sample_id] = exc.kind
        except ValueError:  # an unknown task type: the pipeline records it as record_invalid
            outcome[item.sample_id] = "record_invalid"
    return ids, outcome


def test_every_record_line_gets_exactly_one_outcome(planned):
    ids, outcome = planned
    assert sorted(outcome) == sorted(ids)


@pytest.mark.parametrize("case", RECORD_CASES, ids=lambda c: c.name)
def test_record_is_parsed_or_rejected_on_its_own(case, planned):
    ids, outcome = planned
    sid = next(i for i, c in ids.items() if c is case)
    if case.engine:  # too long for the engine's context: only the engine can tell; the data is fine
        assert outcome[sid] == "ok"
    else:
        assert outcome[sid] in case.expect, f"{case.name} ({sid!r}): {outcome[sid]}"


def test_the_duplicated_id_is_kept_apart(planned):
    ids, outcome = planned
    assert outcome["rec-control"] == outcome["rec-control#2"] == "ok"


def test_a_bad_first_record_does_not_decide_the_file_format(tmp_path):
    """The mmvu card can also read the official release's format; a unified file must not be taken for one because
    its first record lost its problem_type."""
    first = _good("first")
    del first["problem_type"]
    (tmp_path / "a.json").write_text(json.dumps([first, _good("second"), _good("third")]))
    items = get_benchmark(CARD).load_samples(write_data_map(tmp_path, "a.json"))
    assert isinstance(items[0], SampleError) and "problem_type" in str(items[0])
    assert [s.sample_id for s in items[1:] if isinstance(s, Sample)] == ["second", "third"]


def test_non_utf8_bytes_in_a_json_array_reject_only_their_record(tmp_path):
    good = json.dumps(_good("fine")).encode()
    bad = json.dumps(_good("broken", problem="PLACEHOLDER")).encode().replace(b"PLACEHOLDER", b"caf\xe9")
    (tmp_path / "a.json").write_bytes(b"[" + bad + b"," + good + b"]")
    items = get_benchmark(CARD).load_samples(write_data_map(tmp_path, "a.json"))
    assert isinstance(items[0], SampleError) and items[0].sample_id == "broken" and "UTF-8" in str(items[0])
    assert isinstance(items[1], Sample) and items[1].sample_id == "fine"


def test_data_validate_reports_every_hostile_record(tmp_path, capsys):
    from vbench_async.cli import main

    ids = write_records(tmp_path / "hostile.jsonl", RECORD_CASES)
    code = main(["data", "validate", str(tmp_path / "hostile.jsonl"), "--benchmark", CARD, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["records"] == len(ids)
    flagged = {e["sample_id"] for e in report["errors"]}
    for sid, case in ids.items():
        if "ok" not in case.expect and not case.engine:
            assert sid in flagged, case.name


# ----------------------------------------------------------------------------------------------- cache entries


@pytest.fixture(scope="module")
def entry(tmp_path_factory, cache) -> tuple[Path, object]:
    video = _video(tmp_path_factory.mktemp("cache-video") / "v.mp4", frames=28)  # content of its own
    return video, cache.get_or_decode(video, SPEC)


@pytest.mark.parametrize("case", CACHE_CASES, ids=lambda c: c.name)
def test_damaged_entry_is_flagged_then_rebuilt(case, entry, cache):
    video, reference = entry
    path = cache.layout.entry_path(reference.key)
    cache.get_or_decode(video, SPEC)  # the previous case left a rebuilt entry; make sure it is there
    case.damage(path)
    report = verify_cache(cache.root)
    assert [p for p, _ in report.corrupt] == [str(path)], report.corrupt
    before = cache.decodes
    assert cache.get(video, SPEC) is None  # a damaged entry is never served
    rebuilt = cache.get_or_decode(video, SPEC)
    assert cache.decodes == before + 1
    assert (rebuilt.frames == reference.frames).all()
    assert replace(rebuilt.meta, decode_seconds=0) == replace(reference.meta, decode_seconds=0)
    assert verify_cache(cache.root).corrupt == []


def test_verify_delete_removes_damage_of_every_kind(entry, cache, tmp_path):
    """`cache verify --delete` on a cache holding one damaged copy of each case."""
    video, reference = entry
    good = cache.layout.entry_path(reference.key).read_bytes()
    root = tmp_path / "cache"
    for i, case in enumerate(CACHE_CASES):
        path = root / "vbf1" / "entries" / f"{i:02x}" / f"{i:02x}{'0' * 30}.safetensors"
        path.parent.mkdir(parents=True)
        path.write_bytes(good)
        case.damage(path)
    report = verify_cache(root, remove=True)
    assert len(report.corrupt) == report.removed == len(CACHE_CASES)
    assert verify_cache(root).checked == 0


def test_leftovers_of_a_killed_writer_are_ignored_then_collected(entry, cache):
    video, reference = entry
    cache.get_or_decode(video, SPEC)
    tmp = stale_temp_file(cache.layout.entry_path(reference.key))
    assert cache.get(video, SPEC) is not None and verify_cache(cache.root).corrupt == []
    assert gc_cache(cache.root, temp_age_s=0).temp_files >= 1 and not tmp.exists()


def test_an_unreadable_failure_record_means_try_again(entry, cache, tmp_path):
    video = _video(tmp_path / "w.mp4", frames=20)  # never cached before
    key = cache.key(video, SPEC)
    cache.layout.failure_path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.layout.failure_path(key).write_bytes(b"\xff{ not json")
    before = cache.decodes
    assert cache.get_or_decode(video, SPEC).frames.shape[0] >= 1
    assert cache.decodes == before + 1


# ----------------------------------------------------------------------------------------------- result files


def _result(sid: str, **extra) -> dict:
    return {"sample_id": sid, "output": "x", "error": None, **extra}


def test_torn_and_damaged_lines_cost_only_their_samples(tmp_path):
    store = ResultStore(tmp_path, "b", "h")
    with store:
        for sid in ("a", "b", "c"):
            store.append(_result(sid))
    data = store.path.read_bytes().splitlines(keepends=True)
    # bit rot in the middle line, and a last line cut by a crash mid-write
    store.path.write_bytes(data[0] + b'{"sample_id": "b", "out\x00\n' + data[2][:-9])
    assert set(read_lines(store.path)) == {"a"}
    assert store.completed_ids() == {"a"}
    with store:  # resume: the torn tail is cut, new lines start on a line boundary
        store.append(_result("b"))
        store.append(_result("c"))
    assert list(read_lines(store.path)) == ["a", "b", "c"]
    assert store.path.read_bytes().endswith(b"\n")


def test_text_that_is_not_unicode_still_gets_its_line(tmp_path):
    store = ResultStore(tmp_path, "b", "h")
    with store:
        store.append(_result("s", output="lone \ud800 surrogate", details={"iou": float("nan")}))
    got = read_lines(store.path)["s"]
    assert got["output"] == "lone \ud800 surrogate" and got["details"]["iou"] is None


def test_a_second_writer_is_refused_with_a_clear_error(tmp_path):
    from vbench_async.errors import UserError

    first = ResultStore(tmp_path, "b", "h").open()
    try:
        with pytest.raises(UserError, match="another process"):
            ResultStore(tmp_path, "b", "h").open()
    finally:
        first.close()
    shutil.rmtree(tmp_path / "results")
