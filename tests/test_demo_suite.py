"""The synthetic demo suite: real mp4 files with the stated properties, and annotations whose ground truth matches
what the decoded pixels show (checked independently of the generator's own bookkeeping)."""

from __future__ import annotations

import json
import re
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import yaml

from vbench_async.demo.questions import GROUPS
from vbench_async.demo.suite import DEMO_PARAMS, FRAME_RATES, ensure_demo_suite, generate_suite
from vbench_async.demo.videos import COLORS
from vbench_async.samples import parse_record

REPO = Path(__file__).resolve().parents[1]
_ANSWER = re.compile(r"^<answer>(.*)</answer>$", re.S)
_SHAPE_IN_TEXT = re.compile(r"\b(" + "|".join(COLORS) + r") (circle|square|triangle|diamond)\b")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite")
    # Six videos cover every frame rate and both orientations; six questions each reach every group.
    generate_suite(out, n_videos=6, questions_per_video=6, seed=3, min_s=2.0, max_s=14.0)
    return out


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "suite.json").read_text())


def _records(folder: Path) -> dict[str, list[dict]]:
    return {g: json.loads((folder / "annotations" / f"{g}.json").read_text()) for g in GROUPS}


_PALETTE = list(COLORS)


def _palette_lut() -> np.ndarray:
    """Palette index (or -1) for every colour quantised to 5 bits per channel: labels a frame in one lookup."""
    q = np.arange(32) * 8 + 4
    rgb = np.stack(np.meshgrid(q, q, q, indexing="ij"), axis=-1).reshape(-1, 3)
    lut = np.full(len(rgb), -1, dtype=np.int8)
    for k, color in enumerate(COLORS.values()):
        lut[np.abs(rgb - np.array(color)).max(axis=-1) < 45] = k
    return lut


@pytest.fixture(scope="module")
def decoded(suite: Path) -> dict[str, np.ndarray]:
    """Every video decoded with PyAV, as a palette-index map per frame: T x H x W int8, -1 where no palette
    colour is, and -1 over the caption band (its white text would read as the white shape)."""
    scenes = {f"{s['name']}.mp4": s for s in _manifest(suite)["scenes"]}
    lut = _palette_lut()
    out = {}
    for v in _manifest(suite)["videos"]:
        name = Path(v["path"]).name
        # The only fact taken from the generator: where the caption band starts (shapes stay above it).
        band = scenes[name]["captions"][0]["xy"][1] - 2
        with av.open(str(suite / v["path"])) as c:
            labels = []
            for f in c.decode(video=0):
                q = (f.to_ndarray(format="rgb24")[:band] >> 3).astype(np.uint16)
                labels.append(lut[(q[..., 0] << 10) | (q[..., 1] << 5) | q[..., 2]])
        out[name] = np.stack(labels)
    return out


def _answer(record: dict) -> str:
    m = _ANSWER.match(record["solution"])
    assert m, f"solution not wrapped in <answer>: {record['solution']!r}"
    return m.group(1)


def _shape_area(labels: np.ndarray, color: str) -> np.ndarray:
    """Pixels of a palette colour in each frame."""
    return (labels == _PALETTE.index(color)).sum(axis=(1, 2))


def _bbox(labels: np.ndarray, color: str) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(labels == _PALETTE.index(color))
    return (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive (first, last) index pairs of consecutive True values."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0] - 1))


def _fps(v: dict) -> Fraction:
    return Fraction(v["fps"])


def test_videos_are_h264_with_stated_properties(suite: Path) -> None:
    videos = _manifest(suite)["videos"]
    assert len(videos) == 6
    assert {_fps(v) for v in videos} == set(FRAME_RATES)
    assert {v["width"] > v["height"] for v in videos} == {True, False}  # landscape and portrait
    for v in videos:
        with av.open(str(suite / v["path"])) as c:
            s = c.streams.video[0]
            assert s.codec_context.name == "h264" and s.codec_context.pix_fmt == "yuv420p"
            assert (s.codec_context.width, s.codec_context.height) == (v["width"], v["height"])
            assert s.average_rate == _fps(v)
            times = [float(f.time) for f in c.decode(s)]
        assert len(times) == v["num_frames"]
        assert times[0] == 0.0 and times[-1] == pytest.approx((v["num_frames"] - 1) / _fps(v), abs=1e-3)
        assert v["duration"] == pytest.approx(v["num_frames"] / _fps(v), abs=1e-5)
        assert 2.0 - 1 / 24 <= v["duration"] <= 14.0 + 1 / 24


def test_records_use_the_unified_schema(suite: Path) -> None:
    records = _records(suite)
    videos_by_group: dict[str, set[str]] = {}
    for group, recs in records.items():
        assert recs, f"group {group} is empty"
        ids = [r["problem_id"] for r in recs]
        assert len(set(ids)) == len(ids)
        for i, r in enumerate(recs):
            assert r["problem_type"] == GROUPS[group] and r["data_type"] == "video"
            assert (suite / "videos" / r["path"]).is_file()
            assert r["category"] and r["duration"] in ("short", "medium", "long")
            sample = parse_record(r, f"demo-{group}", i)
            assert sample.video == r["path"] and sample.fields["category"] == r["category"]
            if group == "mc":
                assert [o[:3] for o in r["options"]] == ["A. ", "B. ", "C. ", "D. "]
                assert _answer(r) in "ABCD"
            else:
                assert r["options"] == []
            videos_by_group.setdefault(group, set()).add(r["path"])
    paths = [r["path"] for recs in records.values() for r in recs]
    assert max(paths.count(p) for p in set(paths)) >= 3  # several questions share a video
    assert all(sum(p in v for v in videos_by_group.values()) >= 2 for p in set(paths))  # ...across benchmarks


def test_grounding_truth_matches_pixels(suite: Path, decoded: dict[str, np.ndarray]) -> None:
    fps = {Path(v["path"]).name: _fps(v) for v in _manifest(suite)["videos"]}
    checked = 0
    for group in ("tg", "stvg"):
        for r in _records(suite)[group]:
            m = _SHAPE_IN_TEXT.search(r["problem"])
            if not m:  # a caption span: checked in the OCR test
                continue
            frames = decoded[r["path"]]
            gt = json.loads(_answer(r))
            start, end = gt["time"]
            area = _shape_area(frames, m.group(1))
            on = [i for i in range(len(frames)) if area[i] > 20]
            rate = fps[r["path"]]
            assert on and on == list(range(on[0], on[-1] + 1)), "a moving shape is on screen in one stretch"
            assert start == pytest.approx(float(on[0] / rate), abs=1e-3)
            assert end == pytest.approx(float((on[-1] + 1) / rate), abs=1e-3)
            for sec, box in gt.get("boxes", {}).items():
                frame = min(len(frames) - 1, int(int(sec) * rate))
                seen = _bbox(frames[frame], m.group(1))
                assert np.abs(np.array(seen) - np.array(box)).max() <= 2, (r["problem_id"], sec, seen, box)
            if group == "stvg":
                assert gt["boxes"] and all(start <= int(s) <= end for s in gt["boxes"])
            checked += 1
    assert checked >= 4


def test_counts_yes_no_and_choices_match_pixels(suite: Path, decoded: dict[str, np.ndarray]) -> None:
    records = _records(suite)
    for r in records["count"]:
        frames = decoded[r["path"]]
        present = {c: _shape_area(frames, c) > 20 for c in COLORS}
        m = _SHAPE_IN_TEXT.search(r["problem"])
        if m:  # flashes: separate on-screen stretches of that shape
            assert len(_runs(present[m.group(1)])) == int(_answer(r))
        else:  # distinct shapes: each has its own colour
            assert sum(bool(p.any()) for p in present.values()) == int(_answer(r))
    for r in records["yesno"]:
        frames = decoded[r["path"]]
        color, kind = _SHAPE_IN_TEXT.search(r["problem"]).groups()
        area = _shape_area(frames, color)
        if r["problem"].startswith("Is there"):
            seen = bool((area > 20).any()) and _kind(frames, color) == kind
            assert seen == (_answer(r) == "Yes"), r["problem"]
        else:
            asked = r["problem"].split(" move ")[1].rstrip("?").replace("to the ", "")
            assert (_direction(frames, color) == asked) == (_answer(r) == "Yes"), r["problem"]
    for r in records["mc"]:
        frames = decoded[r["path"]]
        chosen = r["options"]["ABCD".index(_answer(r))][3:]
        if r["category"] == "color":
            kind = re.search(r"the (\w+) in the video", r["problem"]).group(1)
            assert _kind(frames, chosen) == kind
        elif r["category"] == "shape":
            assert _kind(frames, r["problem"].split(" the ")[1].split()[0]) == chosen
        else:
            color = _SHAPE_IN_TEXT.search(r["problem"]).group(1)
            assert _direction(frames, color) == chosen


def _kind(labels: np.ndarray, color: str) -> str | None:
    """Classify the shape drawn in `color` from its pixels: fill ratio and where its rows are widest."""
    area = _shape_area(labels, color)
    if not (area > 20).any():
        return None
    mask = labels[int(np.argmax(area))] == _PALETTE.index(color)
    ys, xs = np.nonzero(mask)
    crop = mask[ys.min(): ys.max() + 1, xs.min(): xs.max() + 1]
    fill = crop.mean()
    if fill > 0.9:
        return "square"
    if fill > 0.68:
        return "circle"
    widths = crop.sum(axis=1)
    q = len(widths) // 4
    return "triangle" if widths[-q:].mean() > 2 * widths[:q].mean() else "diamond"


def _direction(labels: np.ndarray, color: str) -> str:
    on = np.nonzero(_shape_area(labels, color) > 20)[0]
    (x0, y0, x1, y1), (u0, v0, u1, v1) = _bbox(labels[on[0]], color), _bbox(labels[on[-1]], color)
    dx, dy = (u0 + u1 - x0 - x1) / 2, (v0 + v1 - y0 - y1) / 2
    if abs(dx) >= abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def _text_mask(text: str, scale: int) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default_imagefont()
    img = Image.new("L", (6 * len(text), 11))
    ImageDraw.Draw(img).text((0, 0), text, fill=255, font=font)
    return (np.asarray(img) > 127).repeat(scale, 0).repeat(scale, 1)


def test_ocr_and_caption_spans_match_pixels(suite: Path) -> None:
    records = _records(suite)
    fps = {Path(v["path"]).name: _fps(v) for v in _manifest(suite)["videos"]}
    scenes = {f"{s['name']}.mp4": s for s in _manifest(suite)["scenes"]}
    spans = {r["path"]: json.loads(_answer(r))["time"] for r in records["tg"] if "text" in r["problem"]}
    ocr_answers = {r["path"]: _answer(r) for r in records["ocr"]}
    assert ocr_answers and spans
    for video in sorted(set(spans) | set(ocr_answers)):
        cap = scenes[video]["captions"][0]  # where to look; what is there is checked against the pixels
        mask = _text_mask(cap["text"], cap["scale"])
        x, y = cap["xy"][0] + 2, cap["xy"][1] + 1
        with av.open(str(suite / "videos" / video)) as c:
            shown = np.array([
                ((f.to_ndarray(format="rgb24")[y: y + mask.shape[0], x: x + mask.shape[1]].mean(-1) > 128) == mask)
                .mean() > 0.95  # the glyphs, pixel for pixel
                for f in c.decode(video=0)
            ])
        runs = _runs(shown)
        assert len(runs) == 1, "the caption is shown in one stretch"
        if video in ocr_answers:
            assert ocr_answers[video] in (cap["text"], cap["text"].split()[-1])
        if video in spans:
            first, last = runs[0]
            assert spans[video][0] == pytest.approx(float(first / fps[video]), abs=1e-3)
            assert spans[video][1] == pytest.approx(float((last + 1) / fps[video]), abs=1e-3)
            assert any(f'"{cap["text"]}"' in r["problem"] for r in records["tg"] if r["path"] == video)


def test_generation_is_deterministic(tmp_path: Path) -> None:
    # Four generations of sizes that are not multiples of 16: with x264's macroblock tree on, its AVX-512 code made
    # about every second file of these sizes differ between generations (on CPUs that have AVX-512).
    sizes = ((192, 108), (108, 192), (160, 96))
    runs = [tmp_path / str(k) for k in range(4)]
    for out in runs:
        generate_suite(out, n_videos=3, questions_per_video=4, seed=7, min_s=2.0, max_s=5.0, sizes=sizes)
    first = runs[0]
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len(files) == 3 + len(GROUPS) + 1
    for out in runs[1:]:
        for f in files:
            assert (first / f).read_bytes() == (out / f).read_bytes(), f"{f} differs"


def test_generate_suite_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        generate_suite(tmp_path, n_videos=0)
    with pytest.raises(ValueError, match="min_s"):
        generate_suite(tmp_path, n_videos=1, min_s=10, max_s=5)


def test_default_demo_suite(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    folder = ensure_demo_suite(tmp_path)
    took = time.perf_counter() - t0
    manifest = _manifest(folder)
    videos = manifest["videos"]
    assert len(videos) == DEMO_PARAMS["n_videos"]
    assert 60 <= sum(manifest["questions"].values()) <= 80
    assert min(v["duration"] for v in videos) == pytest.approx(2.0, abs=0.05)
    assert max(v["duration"] for v in videos) == pytest.approx(60.0, abs=0.05)
    assert {_fps(v) for v in videos} == set(FRAME_RATES)
    assert {v["width"] > v["height"] for v in videos} == {True, False}
    assert all(len(recs) >= 8 for recs in _records(folder).values())
    assert took < 60, f"generating the demo suite took {took:.1f} s"
    t0 = time.perf_counter()
    assert ensure_demo_suite(tmp_path) == folder and time.perf_counter() - t0 < 0.05


def test_cards_point_at_the_groups() -> None:
    from vbench_async.scoring import canonical_task_type

    suite = yaml.safe_load((REPO / "benchmarks" / "suites" / "demo.yaml").read_text())
    assert suite["name"] == "demo"
    assert sorted(suite["benchmarks"]) == sorted(f"demo-{g}" for g in GROUPS)
    for group, problem_type in GROUPS.items():
        card = yaml.safe_load((REPO / "benchmarks" / f"demo-{group}.yaml").read_text())
        assert card["id"] == f"demo-{group}" and card["sources"] == {"demo": group}
        assert card["task_types"] == [problem_type] and "demo" in card["suites"]
        canonical_task_type(problem_type)  # the scorers know the spelling
