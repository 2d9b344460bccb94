"""Data handling: data roots and data maps, media path safety, clip fallback, hub-release specifics, and the
`data validate|check|fetch` and `list` commands (run as a user runs them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import run_cli, shared_dir
from test_benchmarks_golden import build_data_root, load_fixture, write_file

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.annotation_check import check_records
from vbench_async.errors import SampleError, UserError
from vbench_async.samples import Sample, read_records

# Reference file -> benchmark id (the predecessor's registry keys; presets where a file is a variant).
REFERENCE_BENCHMARK = {
    "mlvu-dev": "mlvu@dev", "mlvu-test": "mlvu", "mmvu-all": "mmvu@all", "mmvu-mc": "mmvu",
    "videommmu_with_image": "videommmu",
}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """The `vbench-async` entry point in-process (fast); a few tests below also run it as a subprocess."""
    from vbench_async.cli import main

    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _samples(items: list) -> list[Sample]:
    assert all(isinstance(i, Sample) for i in items), [str(i) for i in items if not isinstance(i, Sample)]
    return items


# ------------------------------------------------------------------------------------------- data roots, paths


def test_data_root_from_env_and_missing_annotations_message(tmp_path: Path, monkeypatch) -> None:
    fx = load_fixture("holmes")
    build_data_root(fx, "unified", tmp_path / "d")
    monkeypatch.setenv("VBENCH_DATA_ROOT", str(tmp_path / "d"))
    assert len(get_benchmark("holmes").load_samples(None)) == 3
    with pytest.raises(UserError, match=r"no annotations for 'lvbench': expected the annotation file .*lvbench\.json "
                                        r"or a snapshot of lmms-eval/LVBench .*data fetch lvbench"):
        get_benchmark("lvbench").load_samples(tmp_path / "empty")


def test_data_map_points_benchmarks_at_other_folders(tmp_path: Path) -> None:
    fx = load_fixture("holmes")
    write_file(tmp_path / "ssd" / "my-holmes.json", fx["unified"]["records"])
    data_map = tmp_path / "datamap.yaml"
    data_map.write_text("benchmarks:\n  holmes: {annotation: ssd/my-holmes.json, video_dir: /mnt/films}\n")
    bench = get_benchmark("holmes@64f")  # a preset uses its base card's mapping
    samples = _samples(bench.load_samples(data_map))
    assert bench.video_root(data_map) == Path("/mnt/films")
    assert bench.video_path(samples[0], data_map) == Path("/mnt/films/videos_cropped/film01.mp4")
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmarks:\n  holmes: {videos: x}\n")
    with pytest.raises(UserError, match=r"unknown field\(s\) .*bad.yaml.benchmarks.holmes.videos; known: annotation, "
                                        r"hub_dir, image_dir, video_dir; did you mean .*video_dir\?"):
        bench.load_samples(bad)


def test_video_paths_must_stay_inside_the_root(tmp_path: Path) -> None:
    bench = get_benchmark("holmes")
    root = tmp_path / "data"
    videos = root / "Video-Holmes"
    (videos / "ok").mkdir(parents=True)
    outside = tmp_path / "elsewhere.mp4"
    outside.write_bytes(b"x")
    (videos / "ok" / "link.mp4").symlink_to(outside)
    (videos / "ok" / "inside.mp4").write_bytes(b"x")
    (videos / "ok" / "inner_link.mp4").symlink_to(videos / "ok" / "inside.mp4")

    def sample(video: str) -> Sample:
        return Sample(benchmark="holmes", sample_id="1", task_type="multiple choice", question="q", answer="A",
                      video=video)

    assert bench.video_path(sample("./ok/inside.mp4"), root) == videos / "ok" / "inside.mp4"
    assert bench.video_path(sample("ok/inner_link.mp4"), root) == videos / "ok" / "inner_link.mp4"
    for bad, reason in [("../secret.mp4", "climbs out"), (str(outside), "is absolute"), ("ok/link.mp4", "symlink")]:
        with pytest.raises(SampleError, match=reason) as err:
            bench.video_path(sample(bad), root)
        assert err.value.kind == "path_unsafe"
    assert bench.video_path(sample(str(outside)), root, allow_outside=True) == outside
    assert bench.video_path(sample("ok/link.mp4"), root, allow_outside=True) == videos / "ok" / "link.mp4"


# ------------------------------------------------------------------------------------------------ clips


def test_livesports_missing_clip_reads_the_full_video_with_a_window(tmp_path: Path) -> None:
    fx = load_fixture("livesports3k_qa")
    root = build_data_root(fx, "unified", tmp_path / "data")
    (root / "LiveSports-3K-QA" / "clips").mkdir(parents=True)
    (root / "LiveSports-3K-QA" / "clips" / "yt_ab_Cd1_300_360.mp4").write_bytes(b"clip")  # this clip was cut
    (root / "LiveSports-3K-QA" / "videos").mkdir(parents=True)
    (root / "LiveSports-3K-QA" / "videos" / "yt_ab_Cd1.mp4").write_bytes(b"full")
    bench = get_benchmark("livesports3k_qa")
    first, second = _samples(bench.load_samples(root))
    assert (first.video, first.window) == ("yt_ab_Cd1.mp4", (120.5, 180.0))
    assert first.fields["clip_source"] == "yt_ab_Cd1_120.5_180.0.mp4"
    assert bench.video_path(first, root) == root / "LiveSports-3K-QA" / "videos" / "yt_ab_Cd1.mp4"
    assert (second.video, second.window) == ("yt_ab_Cd1_300_360.mp4", None)
    assert bench.video_path(second, root) == root / "LiveSports-3K-QA" / "clips" / "yt_ab_Cd1_300_360.mp4"


def test_odv_clip_source_is_found_anywhere_below_its_folder(tmp_path: Path) -> None:
    fx = load_fixture("odvbench")
    root = build_data_root(fx, "unified", tmp_path / "data")
    (root / "ODV-Bench" / "videos" / "league" / "day1").mkdir(parents=True)
    (root / "ODV-Bench" / "videos" / "league" / "day1" / "match01.mkv").write_bytes(b"v")
    bench = get_benchmark("odvbench")
    s0, s1, s2 = _samples(bench.load_samples(root))
    assert (s0.video, s0.window) == ("league/day1/match01.mkv", (10.0, 20.0))
    assert (s1.video, s1.window) == ("league/day1/match01.mkv", (20.5, 42.0))
    assert (s2.video, s2.window) == ("2_match02_s0_e15.mp4", None)  # no source video: the clip stays (and is missing)


# ------------------------------------------------------------------------------------------------ hub specifics


def test_hub_embedded_images_and_videos_found_by_name(tmp_path: Path) -> None:
    fx = load_fixture("videommmu")
    root = build_data_root(fx, "hub", tmp_path / "data")
    snapshot = root / "hub" / "lmms-lab" / "VideoMMMU"
    (snapshot / "Science").mkdir()
    (snapshot / "Science" / "dev_Chemistry_2.mp4").write_bytes(b"v")
    bench = get_benchmark("videommmu")
    perception, adaptation, numerical = _samples(bench.load_samples(root))
    assert adaptation.video == "Science/dev_Chemistry_2.mp4"  # per-discipline folder, found by file name
    assert perception.video == "dev_Biology_7.mp4" and perception.images == ()
    (image,) = bench.image_paths(adaptation, root)
    assert image.parent == snapshot / ".vbench-images" and image.read_bytes().startswith(b"\x89PNG")
    assert numerical.images == adaptation.images  # same bytes, one content-addressed file


def test_hub_stvg_probes_the_video_fps_when_the_record_has_none(tmp_path: Path) -> None:
    import av
    import numpy as np

    fx = copy.deepcopy(load_fixture("stvg"))
    records = fx["hub"]["files"]["data/benchmarks/st-align/stvg.json"][:1]
    del records[0]["meta"]["fps"]
    fx["hub"]["files"]["data/benchmarks/st-align/stvg.json"] = records
    root = build_data_root(fx, "hub", tmp_path / "data")
    video = root / "hub" / "appletea2333" / "ST-Align-Benchmark" / "5550001.mp4"
    with av.open(str(video), "w") as out:  # a real 10 fps file, 6 frames
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(6):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode())
    (sample,) = _samples(get_benchmark("stvg").load_samples(root))
    assert json.loads(sample.answer[len("<answer>"):-len("</answer>")])["time"] == [2.0, 4.0]
    video.unlink()
    (err,) = get_benchmark("stvg").load_samples(root)
    assert isinstance(err, SampleError) and err.kind == "video_missing" and "fps" in str(err)


def test_unified_file_in_the_official_vcr_format_is_converted(tmp_path: Path) -> None:
    fx = load_fixture("vcrbench")
    write_file(tmp_path / "data" / "vcrbench.json", fx["hub"]["files"]["v1/videos/meta_info_video.json"])
    oe, mc = _samples(get_benchmark("vcrbench").load_samples(tmp_path / "data"))
    assert (oe.task_type, oe.answer) == ("open-ended", "<answer>Kitchen</answer>")
    assert mc.options[-1] == "E. The car breaks." and mc.answer == "<answer>E</answer>"  # the fifth option survives


def test_hub_records_that_cannot_be_mapped_are_reported_not_dropped(tmp_path: Path) -> None:
    fx = copy.deepcopy(load_fixture("minerva"))
    recs = fx["hub"]["files"]["minerva.json"]
    recs[0]["answer_id"] = 7
    del recs[1]["video_id"]
    root = build_data_root(fx, "hub", tmp_path / "data")
    first, second = get_benchmark("minerva").load_samples(root)
    assert isinstance(first, SampleError) and "outside the 5 options" in str(first) and first.sample_id == "#0"
    assert isinstance(second, SampleError) and "video_id" in str(second)


# ------------------------------------------------------------------------------------------------ validate


@pytest.mark.parametrize("name", ["charades_sta", "holmes", "livesports3k_qa", "longvideobench", "longvideoreason",
                                  "lvbench", "minerva", "mlvu-dev", "mlvu-test", "mlvu", "mmvu-all", "mmvu-mc", "mmvu",
                                  "motionbench", "mvbench", "ovobench", "stvg", "vcrbench", "videomathqa", "videomme",
                                  "videommlu", "videommmu", "videommmu_with_image", "videoreasonbench", "vsibench"])
def test_every_reference_annotation_validates(name: str) -> None:
    folder = shared_dir("reference-annotations")
    path = next(folder.glob(f"{name}.json*"))
    report = check_records(read_records(path), get_benchmark(REFERENCE_BENCHMARK.get(name, name)), str(path))
    assert report.records == 25 and report.valid == 25 and not report.errors, report.errors


def test_reference_folder_is_fully_covered() -> None:
    folder = shared_dir("reference-annotations")
    names = {p.name.split(".")[0] for p in folder.iterdir()}
    assert names == set(test_every_reference_annotation_validates.pytestmark[0].args[1])


def _broken(records: list[dict]) -> list:
    """Broken variants of valid records, one defect each, at known positions."""
    r = copy.deepcopy(records)
    del r[0]["solution"]                          # 0: missing field
    r[1]["problem_type"] = 7                      # 1: wrong type
    r[2]["problem_type"] = "interpretive dance"   # 2: unknown problem type
    r[3]["solution"] = "<answer>Z</answer>"       # 3: answer names no option
    r[4]["path"] = "../../etc/passwd.mp4"         # 4: unsafe path
    r[5]["options"] = "A. one, B. two"            # 5: options not a list
    r[6]["problem_type"] = "temporal grounding"   # 6: a task type this benchmark does not have
    return r


EXPECTED_KINDS = {0: "record_invalid", 1: "record_invalid", 2: "unknown_task_type", 3: "record_invalid",
                  4: "path_unsafe", 5: "record_invalid", 6: "task_type_mismatch"}


def test_broken_variants_get_clear_per_record_errors() -> None:
    fx = load_fixture("videomme")
    records = [copy.deepcopy(r) for r in fx["unified"]["records"] * 3]  # nine records, seven broken
    report = check_records(_broken(records), get_benchmark("videomme"))
    assert report.records == 9 and report.valid == 2
    assert {e.index: e.kind for e in report.errors} == EXPECTED_KINDS
    messages = {e.index: e.message for e in report.errors}
    assert "lacks required field(s): solution" in messages[0]
    assert "problem_type must be a non-empty string" in messages[1]
    assert "unknown task type 'interpretive dance'; known task types: multiple choice" in messages[2]
    assert "ground truth '<answer>Z</answer>' is not an option letter" in messages[3]
    assert "'..'" in messages[4]
    assert "not one of videomme's task types (multiple choice)" in messages[6]
    assert [e.sample_id for e in report.errors][:2] == ["1", "2"]


def test_validate_cli_on_reference_and_broken_files(tmp_path: Path, capsys) -> None:
    src = shared_dir("reference-annotations", "mvbench.json")
    ok = run_cli("data", "validate", str(src), "--benchmark", "mvbench", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) | {"file": None} == {"file": None, "benchmark": "mvbench", "records": 25, "valid": 25,
                                                     "errors": []}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(_broken(json.loads(src.read_text()))))
    rc, out, _ = cli(capsys, "data", "validate", str(broken), "--benchmark", "mvbench", "--json")
    assert rc == 1
    result = json.loads(out)
    assert (result["records"], result["valid"]) == (25, 18)
    assert {e["index"]: e["kind"] for e in result["errors"]} == EXPECTED_KINDS
    rc, out, _ = cli(capsys, "data", "validate", str(broken), "--benchmark", "mvbench")
    assert rc == 1
    assert "25 records, 18 valid, 7 invalid" in out and "record #2 (id 3): unknown_task_type" in out
    rc, _, err = cli(capsys, "data", "validate", str(tmp_path / "nope.json"), "--benchmark", "mvbench")
    assert rc == 2 and "no such annotation file" in err


def test_validate_reports_an_unreadable_file(tmp_path: Path) -> None:
    from vbench_async.benchmarks.annotation_check import check_file

    path = tmp_path / "x.json"
    path.write_text("[{not json")
    report = check_file(path, get_benchmark("holmes"))
    assert not report.ok and report.records == 0 and report.errors[0].index == -1
    lines = tmp_path / "x.jsonl"
    lines.write_text(json.dumps(load_fixture("holmes")["unified"]["records"][0]) + "\n{broken\n")
    report = check_file(lines, get_benchmark("holmes"))
    assert (report.records, report.valid) == (2, 1) and "line 2 is not valid JSON" in report.errors[0].message


# ------------------------------------------------------------------------------------------------ check, list, fetch


def test_data_check_lists_missing_videos(tmp_path: Path, capsys) -> None:
    fx = load_fixture("videommmu")
    root = build_data_root(fx, "unified", tmp_path / "data")
    videos = root / "VideoMMMU"
    (videos / "images").mkdir(parents=True)
    for name in ("dev_Biology_7.mp4", "dev_Chemistry_2.mp4", "images/dev_Chemistry_2.png"):
        (videos / name).write_bytes(b"x")
    rc, out, _ = cli(capsys, "data", "check", "videommmu", "--data-root", str(root), "--json")
    assert rc == 1
    report = json.loads(out)["videommmu"]
    assert report["records"] == 3 and report["media_files"] == 5 and report["source"] == "unified"
    assert sorted(Path(p).name for p in report["missing"]) == ["dev_Electronics_4.mp4", "dev_Electronics_4.png"]
    (videos / "dev_Electronics_4.mp4").write_bytes(b"x")
    (videos / "images" / "dev_Electronics_4.png").write_bytes(b"x")
    rc, out, _ = cli(capsys, "data", "check", "videommmu", "--data-root", str(root), "--no-probe")  # b"x": no video
    assert rc == 0 and "3 records (0 invalid), 5 media files" in out and ": ok" in out
    rc, out, _ = cli(capsys, "data", "check", "--suite", "grounding", "--data-root", str(root))
    assert rc == 1 and "no annotations for 'charades_sta'" in out


def test_data_check_finds_unreadable_videos_and_closes_with_a_summary(tmp_path: Path, capsys) -> None:
    from support.videos import write_video

    root = build_data_root(load_fixture("videommmu"), "unified", tmp_path / "data")
    videos = root / "VideoMMMU"
    (videos / "images").mkdir(parents=True)
    for name in ("dev_Biology_7", "dev_Chemistry_2", "dev_Electronics_4"):
        write_video(videos / f"{name}.mp4", frames=8, fps=4)
        (videos / "images" / f"{name}.png").write_bytes(b"x")
    rc, out, _ = cli(capsys, "data", "check", "videommmu", "--data-root", str(root))
    assert rc == 0 and out.splitlines()[-1].startswith("1 of 1 benchmark(s) have all their data under")
    damaged = videos / "dev_Chemistry_2.mp4"
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])  # a download cut short
    rc, out, _ = cli(capsys, "data", "check", "videommmu", "--data-root", str(root))
    assert rc == 1 and f"  unreadable: {damaged}: " in out and "0 missing, 0 unsafe, 1 unreadable" in out
    assert out.splitlines()[-1].startswith("0 of 1 benchmark(s) have all their data")
    rc, out, _ = cli(capsys, "data", "check", "--suite", "all", "--data-root", str(tmp_path / "nowhere"))
    last = out.splitlines()[-1]
    assert rc == 1 and last.startswith("0 of 22 benchmark(s) have all their data under") and "does not exist" in last
    assert "--data-root DIR" in last and "$VBENCH_DATA_ROOT" in last and "data fetch NAME" in last


def test_list_shows_record_counts_when_data_is_present(tmp_path: Path, capsys) -> None:
    root = build_data_root(load_fixture("videomathqa"), "unified", tmp_path / "data")
    rc, out, _ = cli(capsys, "list", "--data-root", str(root), "--json")
    assert rc == 0
    rows = {r["id"]: r for r in json.loads(out)["benchmarks"]}
    assert rows["videomathqa"]["records"] == 6 and rows["videomme"]["records"] is None
    assert rows["vsibench"]["task_types"] == ["multiple choice", "regression"]
    assert "64f" in rows["videomme"]["presets"] and rows["ovobench"]["sources"] == ["unified", "hub"]
    table = run_cli("list", "--suite", "grounding", "--data-root", str(root))  # as a user runs it
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["id", "name"] and lines[2].startswith("charades_sta")
    assert "2 benchmarks" in table.stdout


def test_list_counts_the_demo_records_once_the_demo_suite_exists(tmp_path: Path, capsys, monkeypatch) -> None:
    n = len(get_benchmark("demo-mc").load_samples(None))  # generates the suite, as the first `make demo` does
    rc, out, _ = cli(capsys, "list", "--suite", "demo", "--json")
    rows = {r["id"]: r for r in json.loads(out)["benchmarks"]}
    assert rc == 0 and rows["demo-mc"]["records"] == n > 0 and all(r["records"] for r in rows.values())
    monkeypatch.setenv("VBENCH_ASYNC_HOME", str(tmp_path / "fresh"))  # a fresh machine: no suite yet
    rc, out, _ = cli(capsys, "list", "--suite", "demo")
    assert rc == 0 and "demo-mc " in out and not (tmp_path / "fresh").exists()  # not generated just to count
    assert "(demo-* and seeing-*: synthetic suites, generated by their first run, e.g. `make demo`)" in out
    rc, out, _ = cli(capsys, "list", "--suite", "seeing")  # the seeing suite: its own folder, also not generated
    assert rc == 0 and "seeing-when " in out and not (tmp_path / "fresh").exists()


def test_fetch_plans_the_snapshot_and_fails_clearly_offline(tmp_path: Path, capsys) -> None:
    from vbench_async.benchmarks.fetch import plan_fetch

    plan = plan_fetch(get_benchmark("mvbench").card, tmp_path, with_videos=True)
    assert plan.dest == tmp_path / "hub" / "OpenGVLab" / "MVBench" and plan.patterns == ("json/*.json",)
    assert plan.video_patterns == ("video/*",) and plan.video_revision == "video"
    with pytest.raises(UserError, match="has no hub release"):
        plan_fetch(get_benchmark("odvbench").card, tmp_path)
    rc, _, err = cli(capsys, "data", "fetch", "videomme", "--dest", str(tmp_path))  # HF_HUB_OFFLINE=1 (conftest)
    assert rc == 2 and "Traceback" not in err
    assert "cannot download lmms-lab/Video-MME" in err and str(tmp_path / "hub" / "lmms-lab") in err
    # Online mode with an unreachable endpoint exercises the real network path of snapshot_download.
    proc = run_cli("data", "fetch", "holmes", "--dest", str(tmp_path),
                   env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 2 and "cannot download TencentARC/Video-Holmes" in proc.stderr, proc.stderr


def test_data_commands_have_help(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli(capsys, "data", "--help")
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "validate" in out and "fetch" in out and "check" in out


def test_a_data_map_naming_a_synthetic_benchmark_is_refused_not_ignored(tmp_path: Path) -> None:
    """A demo or seeing card always reads its generated suite: a data map entry for it would be silently ignored."""
    from vbench_async.benchmarks.sources import resolve
    from vbench_async.errors import UserError

    data_map = tmp_path / "map.yaml"
    data_map.write_text(f"benchmarks:\n  seeing-size: {{annotation: {tmp_path / 'mine.json'}}}\n")
    with pytest.raises(UserError, match="always reads its generated suite"):
        resolve(get_benchmark("seeing-size").card, data_map)
