"""What the model saw, on the site: result lines record their frames (real frame cache, real mp4 files), the sample
browser gets a thumbnail strip per line from the cache (or from the video when the entry is gone), thumbnails are
shared between runs, compare pages list the flipped samples, and config badges name the setting that differs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from PIL import Image
from test_leaderboard_runs import make_frame_runs

from vbench_async.benchmarks import get_benchmark
from vbench_async.frames.cache import FrameCache
from vbench_async.leaderboard import build_site
from vbench_async.leaderboard.thumbnails import MAX_PER_SAMPLE, THUMB_WIDTH, Thumbnailer
from vbench_async.models import family_ref
from vbench_async.sample_result import Result, result_schema


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with FrameCache(tmp_path_factory.mktemp("frames-cache"), workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache) -> list[Path]:
    return make_frame_runs(tmp_path_factory.mktemp("frame-runs"), cache)


@pytest.fixture(scope="module")
def site(runs, tmp_path_factory) -> Path:
    return build_site(runs, tmp_path_factory.mktemp("frame-site") / "site")


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for f in sorted((run / "results").glob("*.jsonl")) for x in f.read_text().splitlines()]


def _embedded(page: Path, element_id: str):
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', page.read_text(), re.S)
    assert m, element_id
    return json.loads(m.group(1))


def test_each_line_records_the_frames_the_model_received(runs, cache):
    bench = get_benchmark("demo-mc")
    lines = _lines(runs[0])
    assert lines and all(line["frames"] is not None for line in lines)
    for line in lines:
        jsonschema.validate(line, result_schema())
        assert Result.from_dict(line).to_dict() == line
        f = line["frames"]
        sample = next(s for s in bench.load_samples(None) if s.sample_id == line["sample_id"])
        window = (1.0, 3.0) if line is lines[0] else None
        spec = bench.frame_spec(family_ref("qwen2.5-vl"), {})
        entry = cache.get(bench.video_path(sample, None), spec, window)
        assert entry is not None and f["cache_key"] == entry.key
        assert f["indices"] == list(entry.meta.frames_indices) and f["n"] == len(f["indices"]) == len(f["timestamps"])
        assert f["size"] == list(entry.frames.shape[1:3]) and f["timestamps"][1] == round(f["indices"][1] / f["fps"], 3)
        assert f["window"] == (list(window) if window else None)
    first = lines[0]["frames"]
    assert all(1.0 <= t <= 3.0 + 1 / first["fps"] for t in first["timestamps"])  # sampled inside the clip window
    # A line written before the field existed reads back, and validates, without it.
    old = {k: v for k, v in lines[1].items() if k != "frames"}
    jsonschema.validate(old, result_schema())
    assert Result.from_dict(old).frames is None


def test_the_sample_browser_gets_a_frame_strip_per_line(site, runs):
    rows = _embedded(site / "samples" / "demo-mc.html", "sample-data")
    assert len(rows) == 3 * len(_lines(runs[0]))
    for row in rows:
        f = row["frames"]
        assert f["origin"] == "frame cache" and f["missing"] is None
        assert 1 <= len(f["thumbs"]) <= min(f["n"], MAX_PER_SAMPLE)
        assert all((site / t["src"]).is_file() and t["t"] is not None for t in f["thumbs"])
        assert row["prompt"] and row["categories"][0].startswith("task type: ")
    windowed = [r for r in rows if r["sample_id"] == rows[0]["sample_id"]]
    assert all(r["frames"]["window"] == [1.0, 3.0] for r in windowed)
    for jpg in (site / "frames").iterdir():  # small thumbnails, named by their content
        with Image.open(jpg) as im:
            assert im.format == "JPEG" and im.width <= THUMB_WIDTH
    assert sum(p.stat().st_size for p in (site / "frames").iterdir()) < 2_000_000
    exported = json.loads((site / "data" / "demo-mc.samples.json").read_text())
    assert all(r["frames"]["cache_key"] and "source" not in r["frames"] for r in exported)  # no paths of the run's host


def test_runs_that_saw_the_same_frames_share_their_thumbnails(runs, tmp_path):
    one = build_site(runs[:1], tmp_path / "one")
    two = build_site(runs[:2], tmp_path / "two")  # same frames, other answers
    assert sorted(p.name for p in (one / "frames").iterdir()) == sorted(p.name for p in (two / "frames").iterdir())
    three = build_site(runs, tmp_path / "three")  # the 8-frame budget saw other frames
    assert len(list((three / "frames").iterdir())) > len(list((one / "frames").iterdir()))
    bare = build_site(runs[:1], tmp_path / "bare", frames=False)
    assert not (bare / "frames").exists()


def test_a_strip_comes_from_the_video_when_the_cache_entry_is_gone(runs, tmp_path):
    seen = _lines(runs[0])[1]["frames"]
    written: dict[str, bytes] = {}
    thumbs = Thumbnailer(lambda rel, data: written.__setitem__(rel, data), [tmp_path / "empty-cache"])
    strip = thumbs.strip(seen)
    assert strip.origin == "video file" and len(strip.thumbs) == min(seen["n"], MAX_PER_SAMPLE)
    assert {t["src"] for t in strip.thumbs} <= set(written)
    gone = Thumbnailer(lambda rel, data: None, [tmp_path / "empty-cache"]).strip({**seen, "source": "/nope.mp4"})
    assert gone.thumbs == [] and "not in the frame cache" in gone.missing
    assert thumbs.strip(None) is None and thumbs.strip({"n": 3}).missing  # no record; a malformed one


def test_a_rebuild_reuses_each_strip_while_its_thumbnails_are_there(runs, tmp_path, monkeypatch):
    """Strips are made once per cache entry, not per build: a rebuild encodes no JPEG; a deleted thumbnail is made
    again (only the strips that name it); a memo that is damaged, of other settings or naming paths is not used; a
    link put in place of a thumbnail is replaced, never kept."""
    from vbench_async.leaderboard import thumbnails

    made: list[int] = []
    real = thumbnails.encode_thumbnail
    monkeypatch.setattr(thumbnails, "encode_thumbnail", lambda *a, **k: made.append(1) or real(*a, **k))  # counts

    def build() -> tuple[int, list]:
        before = len(made)
        site = build_site(runs[:1], tmp_path / "site")
        return len(made) - before, [r["frames"] for r in _embedded(site / "samples" / "demo-mc.html", "sample-data")]

    first, strips = build()
    assert first > 0 and all(f["thumbs"] for f in strips)
    again, strips_again = build()
    assert again == 0 and strips_again == strips
    site = tmp_path / "site"
    victim = strips[0]["thumbs"][0]["src"]
    (site / victim).unlink()
    remade, strips_remade = build()
    assert 0 < remade < first and strips_remade == strips and (site / victim).is_file()
    memo = json.loads((site / thumbnails.MEMO).read_text())
    for bad in ("{not json", json.dumps({**memo, "version": "other"}),
                json.dumps({**memo, "strips": {k: [o, ["../../escape.jpg"] * len(n)]
                                               for k, (o, n) in memo["strips"].items()}})):
        (site / thumbnails.MEMO).write_text(bad)
        assert build() == (first, strips)
    (site / victim).unlink()
    (site / victim).symlink_to(tmp_path / "elsewhere.jpg")
    (tmp_path / "elsewhere.jpg").write_bytes(b"not ours")
    remade, _ = build()
    assert remade > 0 and not (site / victim).is_symlink() and (site / victim).read_bytes() != b"not ours"


def test_lines_without_frames_render_without_a_strip(runs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(runs[0], old)
    for f in (old / "results").glob("*.jsonl"):
        lines = [{k: v for k, v in json.loads(x).items() if k != "frames"} for x in f.read_text().splitlines()]
        f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    site = build_site([old], tmp_path / "site")
    rows = _embedded(site / "samples" / "demo-mc.html", "sample-data")
    assert rows and all(r["frames"] is None for r in rows)


def test_compare_page_lists_the_flipped_samples_with_their_frames(site, runs):
    index = (site / "index.html").read_text()
    assert 'href="compare/frames-a--frames-b.html"' in index
    page = (site / "compare" / "frames-a--frames-b.html").read_text()
    a = {x["sample_id"]: x["score"] for x in _lines(runs[0])}
    b = {x["sample_id"]: x["score"] or 0.0 for x in _lines(runs[1])}
    flipped = sorted(sid for sid in a if a[sid] != b[sid])
    assert flipped and re.findall(r'<td class="mono">([^<]+)</td>', page) == flipped
    assert page.count('<img class="thumb"') >= len(flipped)
    assert "accuracy by group" in page  # the category bars


def test_config_badges_name_the_setting_that_differs_and_budgets_are_charted(site):
    board = pd.read_csv(site / "data" / "leaderboard.csv", keep_default_na=False)
    markers = dict(zip(board["run"], board["markers"]))
    assert "config B: frames.max_frames=8" in markers["frames-b8"]
    assert "config A: frames.max_frames=32" in markers["frames-a"]
    page = (site / "benchmarks" / "demo-mc.html").read_text()
    assert "score against frame budget" in page and "model-b" in page.split("score against frame budget")[-1]


def test_official_and_robust_readings_and_the_samples_where_they_differ(runs, tmp_path):
    run = tmp_path / "readings"
    shutil.copytree(runs[0], run)
    f = next((run / "results").glob("*.jsonl"))
    lines = [json.loads(x) for x in f.read_text().splitlines()]
    for i, line in enumerate(lines):  # the official protocol rejects the first two answers the careful grader took
        line["official"] = {"value": 0.0 if i < 2 else line["score"], "extracted": None, "guessed": False,
                            "needs_judge": False}
        line["robust"] = {"value": line["score"], "extracted": line["extracted"], "guessed": False,
                          "needs_judge": False}
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    site = build_site([run], tmp_path / "site")
    page = (site / "benchmarks" / "demo-mc.html").read_text()
    n = len(lines)
    assert f"?readings=differ&amp;run=readings\">2 of {n}</a>" in page
    assert f"{100 * (n - 2) / n:.2f}" in page and "100.00" in page  # official and robust headlines
    rows = _embedded(site / "samples" / "demo-mc.html", "sample-data")
    assert sum(1 for r in rows if r["official"] != r["robust"]) == 2


def test_compare_command_names_the_differing_setting_and_the_flipped_samples(runs, capsys):
    from vbench_async.cli import main

    assert main(["compare", str(runs[0]), str(runs[2]), "--json"]) == 0
    mc = json.loads(capsys.readouterr().out)["benchmarks"]["demo-mc"]
    assert mc["config_differs"] and mc["differs_in"] == ["frames.max_frames"]
    a = {x["sample_id"]: x["score"] for x in _lines(runs[0])}
    b = {x["sample_id"]: x["score"] or 0.0 for x in _lines(runs[2])}
    assert [f["sample_id"] for f in mc["flipped"]] == sorted(s for s in a if a[s] != b[s])
    assert main(["compare", str(runs[0]), str(runs[2])]) == 0
    table = capsys.readouterr().out
    assert "config differs: frames.max_frames" in table and "flipped" in table
