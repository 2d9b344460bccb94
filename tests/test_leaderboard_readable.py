"""The board stays readable at 30 runs x 22 benchmarks and on a phone, checked by bounding boxes in a real headless
Chromium (tests/support/layout.py): at 1,440 px the 30 x 22 board, and at 390 px the board, a samples page, a compare
page, a run page and a benchmark page show no text over other text, no text outside its table cell and no sideways
scroll of the page; the full model names, the average and the average rank stay in view. The model-fact columns show
and hide, the size and family filters count the right runs, the average ranks are the runs' own, and only a setting
that can change a score marks a run as differently set up.

The runs are written by the real result store, line builder, scorers and summary writer
(test_leaderboard_runs.make_run), each from a model folder holding what a checkpoint's folder holds (config.json, a
safetensors header, a training record) so the manifest and the board read them as they would a real checkpoint's."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from support.layout import assert_readable, layout, screenshot, set_width
from test_leaderboard_browser import page  # noqa: F401 - the Chromium tab fixture
from test_leaderboard_runs import make_run

from vbench_async.backends.base import SamplingParams
from vbench_async.benchmarks import get_benchmark, load_suite
from vbench_async.benchmarks.registry import suite_files
from vbench_async.errors import SampleError
from vbench_async.leaderboard import build_site, load_runs
from vbench_async.leaderboard.config_groups import comparable
from vbench_async.leaderboard.names import breakable, short_labels
from vbench_async.results.result_config import ResultConfig
from vbench_async.samples import Sample, parse_record

N = 31  # samples per benchmark: a prime above 30 runs and 22 benchmarks, so k = 1 + (3j + 5i) % N differs along
RUNS = 30  # every row and every column (run j, benchmark i answers its first k samples right)
PHONE, LAPTOP = 390, 1440
EIGHT_FRAMES, PARTIAL, FAILING = 3, 5, 7  # run 3: run 2's checkpoint at 8 frames; run 5: one sample short; run 7:
# a failed sample in each benchmark where it had a wrong answer to fail
OPTIONS = ["A. red", "B. blue", "C. green", "D. grey"]
GROUNDING = {"temporal grounding": "demo-tg", "spatial-temporal grounding": "demo-stvg"}  # samples to borrow


@dataclass(frozen=True)
class Model:
    """A checkpoint's folder: its name (the board's label), family, size and parts, and a training record or none."""

    name: str
    family: str
    parameters: int
    language_model: str  # config.json's text_config._name_or_path, or "" for a config that names no hub model
    vision: str  # vision_config.model_type
    step: int | None = None  # a vbench-async training export (vbench_train.json) at this step


SIZES = (900_000_000, 2_200_000_000, 8_300_000_000, 14_000_000_000, 38_000_000_000, 110_000_000_000)  # every band
FAMILIES = (("qwen2.5-vl", "Qwen/Qwen2.5-7B-Instruct", "qwen2_5_vl"), ("qwen3-vl", "", "qwen3_vl"),
            ("internvl", "Qwen/Qwen2.5-32B-Instruct", "internvl_vision"),
            ("llava-onevision", "Qwen/Qwen2-0.5B-Instruct", "siglip_vision_model"))


def _models() -> list[Model]:
    """30 checkpoints with long names that differ late (a step, a seed), one name with no separator at all."""
    out = []
    for j in range(RUNS):
        family, lm, vision = FAMILIES[j % len(FAMILIES)]
        name = f"{family}-instruct-video-grpo-temporal-mix-v2-lr1e-6-step-{1000 + 100 * j}"
        if j == 9:
            name = "AnExtremelyLongCheckpointNameWithoutAnySeparatorThatMustStillWrapInsideItsCell"
        out.append(Model(name, family, SIZES[j % len(SIZES)], lm, vision, 1000 + 100 * j if j % 3 == 0 else None))
    out[EIGHT_FRAMES] = out[EIGHT_FRAMES - 1]  # the same checkpoint again, at 8 frames: the same label twice
    return out


def _write_model(folder: Path, m: Model) -> Path:
    """The files of a checkpoint's folder the manifest and the board read: config.json, a safetensors header (the
    parameter count; no tensor data is needed to count), the training export's record."""
    folder.mkdir(parents=True, exist_ok=True)
    text = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584}
    if m.language_model:
        text["_name_or_path"] = m.language_model
    config = {"model_type": m.family.replace("-", "_").replace(".", "_"), "text_config": text,
              "vision_config": {"model_type": m.vision, "depth": 32, "hidden_size": 1280}}
    (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [m.parameters], "data_offsets": [0, 0]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    if m.step is not None:  # as train/checkpoint.export_hf writes it
        (folder / "vbench_train.json").write_text(json.dumps({"step": m.step, "config_hash": "0123abcd",
                                                              "base_model": "Qwen/Qwen2.5-VL-7B-Instruct"}))
    return folder


def _samples() -> dict[str, list[Sample]]:
    """N samples for each benchmark of suite `all` (their own data is not at hand): four-option questions, and for
    the grounding benchmarks the demo suite's grounding samples under the benchmark's id."""
    out = {}
    for bid in load_suite(suite_files()["all"])[1]:
        borrowed = next((GROUNDING[t] for t in get_benchmark(bid).card.task_types if t in GROUNDING), None)
        if borrowed:
            src = list(get_benchmark(borrowed).load_samples(None))
            out[bid] = [dataclasses.replace(src[i % len(src)], benchmark=bid, sample_id=f"{bid}-{i:03d}")
                        for i in range(N)]
        else:
            rec = {"problem": "Which colour is the ball?", "problem_type": "multiple choice", "options": OPTIONS}
            out[bid] = [parse_record({**rec, "solution": f"<answer>{'ABCD'[i % 4]}</answer>", "problem_id": i,
                                      "path": f"v{i}.mp4"}, bid, i) for i in range(N)]
    return out


def _answers(right_first: dict[str, int], failing: bool):
    """Right on the first k samples of each benchmark, then no answer (a score of k / N); `failing`: the last sample
    fails instead where it was to be wrong (the score stays k / N)."""
    def answer(sample: Sample, i: int) -> str | SampleError:
        if failing and i == N - 1 >= right_first[sample.benchmark]:
            return SampleError("engine_error", "RuntimeError: out of memory")
        return f"The answer is {sample.answer}" if i < right_first[sample.benchmark] else "I cannot tell."
    return answer


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> dict[str, Any]:
    return build_board(tmp_path_factory.mktemp("readable"))


def build_board(root: Path) -> dict[str, Any]:
    """The 30 runs under `root`/runs, their model folders under `root`/models and their site in `root`/site."""
    samples = _samples()
    bids = list(samples)
    models = _models()
    runs = []
    for j, m in enumerate(models):
        k = {bid: 1 + (3 * j + 5 * i) % N for i, bid in enumerate(bids)}
        runs.append(make_run(root / "runs" / f"run-{j:02d}", m.name, _answers(k, failing=j == FAILING),
                             benchmarks=tuple(bids), samples=samples, family=m.family,
                             model_path=_write_model(root / "models" / m.name, m),
                             frame_overrides={"max_frames": 8} if j == EIGHT_FRAMES else None,
                             keep=N - 1 if j == PARTIAL else None))
    summaries = [json.loads((r / "summary.json").read_text()) for r in runs]
    scores = [[s["benchmarks"][bid]["score"] for bid in bids] for s in summaries]
    assert all(0 < x for row in scores for x in row)  # every score non-zero ...
    assert all(len(set(row)) == len(bids) for j, row in enumerate(scores) if j != PARTIAL)  # ... distinct in a row
    assert all(len({row[i] for row in scores}) >= RUNS - 2 for i in range(len(bids)))  # ... and (almost) each column
    site = build_site(runs, root / "site", frames=False)
    failed = sum(b["n_failed"] for b in summaries[FAILING]["benchmarks"].values())
    return {"site": site, "runs": runs, "models": models, "bids": bids, "scores": scores, "failed": failed}


def _labels(board: dict[str, Any]) -> list[str]:
    """Each run's label as the board must show it (the same checkpoint twice: its folder in brackets)."""
    names = [m.name for m in board["models"]]
    return [n if names.count(n) == 1 else f"{n} ({r.name})" for n, r in zip(names, board["runs"])]


def _expected_avg_ranks(scores: list[list[float]]) -> list[str]:
    """Per run: the mean of its dense rank (1 = best) on each benchmark, from the summaries alone."""
    ranks = [[0] * len(scores[0]) for _ in scores]
    for i in range(len(scores[0])):
        column = sorted({row[i] for row in scores}, reverse=True)
        for j, row in enumerate(scores):
            ranks[j][i] = column.index(row[i]) + 1
    return [f"{sum(r) / len(r):.1f}" for r in ranks]


_ROWS = """Array.from(document.querySelectorAll('#leaderboard tbody tr')).filter(r => r.offsetParent !== null)
  .map(r => ({label: r.cells[1].dataset.v, name: r.querySelector('a.name').textContent,
              clipped: r.querySelector('a.name').scrollWidth > r.querySelector('a.name').clientWidth,
              rank: r.cells[0].textContent, avg_rank: r.querySelector('td.avgrank').textContent,
              badges: Array.from(r.querySelectorAll('.marker')).map(b => b.textContent),
              meta: Object.fromEntries(Array.from(r.querySelectorAll('td.meta')).filter(c => c.offsetParent !== null)
                                       .map(c => [c.dataset.meta, c.textContent]))}))"""


def _pick(page, element: str, value: str, event: str = "change") -> str:  # noqa: F811
    page.js(f"(e => {{ e.value = {json.dumps(value)}; e.dispatchEvent(new Event('{event}')); }})"
            f"(document.getElementById('{element}'))")
    return page.js("document.getElementById('board-count').textContent")


def _all_columns(page) -> list[str]:  # noqa: F811
    """Open the column picker and tick every box; returns the columns offered."""
    return page.js("""(() => { const d = document.getElementById('board-columns'); d.open = true;
      return Array.from(d.querySelectorAll('input')).map(b => { if (!b.checked) b.click(); return b.value; }); })()""")


def test_the_30_by_22_board_at_1440_px(page, board, tmp_path):  # noqa: F811
    set_width(page, LAPTOP)
    try:
        page.goto((board["site"] / "index.html").as_uri())
        assert_readable(page, LAPTOP, "board")
        fit = page.js("(s => ({table: s.scrollWidth, box: s.clientWidth}))(document.querySelector('.board-scroll'))")
        assert fit["table"] <= fit["box"], fit  # 22 benchmarks, the average and the average rank without scrolling
        headers = page.js("Array.from(document.querySelectorAll('#leaderboard thead th[data-col]'))"
                          ".filter(t => t.offsetParent !== null).map(t => t.dataset.col)")
        assert headers == [*board["bids"], "avg: all"]
        rows = {r["label"]: r for r in page.js(_ROWS)}
        assert sorted(rows) == sorted(_labels(board))
        for label, r in rows.items():  # the whole name, wrapped between its parts, never cut
            assert r["name"] == label and not r["clipped"], r
        screenshot(page, "board-30x22-1440.png", tmp_path)

        labels = _labels(board)  # the average ranks are the runs' own
        assert [rows[lab]["avg_rank"] for lab in labels] == _expected_avg_ranks(board["scores"])

        # only a setting that can change a score marks a run: run 3's 8 frames; not run 5's fewer samples, not the
        # families' own pixel defaults, not the greedy seed
        configs = {lab: [b for b in rows[lab]["badges"] if "=" in b] for lab in labels}
        assert configs.pop(labels[EIGHT_FRAMES]) == ["max_frames=8"] and not any(configs.values()), configs
        assert "partial" in rows[labels[PARTIAL]]["badges"]
        assert board["failed"] > 0 and f"{board['failed']} failed" in rows[labels[FAILING]]["badges"]

        # every fact column shown: still no overlap, and the page itself does not scroll sideways
        assert _all_columns(page) == ["family", "parameters", "language_model", "vision_encoder", "frames", "recipe",
                                      "revision", "date"]
        assert_readable(page, LAPTOP, "board, every column")
        meta = {r["label"]: r["meta"] for r in page.js(_ROWS)}
        for label, m in zip(labels, board["models"]):
            assert meta[label]["family"] == m.family
            assert meta[label]["language_model"] == (m.language_model or "qwen2, 28 layers × 3584")
            assert meta[label]["vision_encoder"] == f"{m.vision}, 32 layers × 1280"
            assert meta[label]["recipe"] == (f"trained from Qwen/Qwen2.5-VL-7B-Instruct, step {m.step}" if m.step
                                             else "–")
        assert meta[labels[0]]["parameters"] == "900M" and meta[labels[2]]["parameters"] == "8.3B"
        screenshot(page, "board-30x22-every-column-1440.png", tmp_path)

        # filters by size band and family, alone and together
        bands = page.js("Array.from(document.getElementById('board-size').options).slice(1).map(o => o.value)")
        assert bands == ["< 1B", "1-4B", "4-10B", "10-30B", "30-80B", "80B+"]
        in_band = [sum(1 for m in board["models"] if m.parameters == SIZES[i]) for i in range(len(SIZES))]
        for band, n in zip(bands, in_band):
            assert _pick(page, "board-size", band) == f"{n} of {RUNS} runs", band
        both = sum(1 for m in board["models"] if m.parameters == SIZES[4] and m.family == "internvl")
        _pick(page, "board-size", bands[4])
        assert both and _pick(page, "board-family", "internvl") == f"{both} of {RUNS} runs"
        _pick(page, "board-size", "")
        assert _pick(page, "board-family", "") == f"{RUNS} of {RUNS} runs"
        assert page.errors() == []
    finally:
        page.send("Emulation.clearDeviceMetricsOverride")


_IN_VIEW = """(cell => {
  cell.scrollIntoView({block: 'center', inline: 'nearest'});
  const r = cell.getBoundingClientRect(), x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
  const hit = document.elementFromPoint(x, y);
  return {left: r.left, right: r.right, on_top: !!hit && (hit === cell || cell.contains(hit))};
})"""


def test_every_page_type_at_390_px(page, board, tmp_path):  # noqa: F811
    site = board["site"]
    set_width(page, PHONE)
    try:
        page.goto((site / "index.html").as_uri())
        assert_readable(page, PHONE, "board")
        screenshot(page, "board-390.png", tmp_path)
        # the model name and the average stay in view wherever the table is scrolled to
        for scroll in ("0", "s.scrollWidth"):
            page.js(f"(s => {{ s.scrollLeft = {scroll}; }})(document.querySelector('.board-scroll'))")
            for part in ("a.name", "td.suite:not(.hidden)", "td.avgrank"):
                got = page.js(f"{_IN_VIEW}(document.querySelector('#leaderboard tbody tr:nth-child(2) {part}'))")
                assert 0 <= got["left"] and got["right"] <= PHONE and got["on_top"], (scroll, part, got)
        assert page.js("(s => s.scrollLeft > 0)(document.querySelector('.board-scroll'))")  # the table did scroll
        page.js("(s => { s.scrollLeft = 0; window.scrollTo(0, 0); })(document.querySelector('.board-scroll'))")
        _all_columns(page)
        assert_readable(page, PHONE, "board, every column")

        pages = {"samples": site / "samples" / "holmes.html", "compare": site / "compare" / "run-00--run-09.html",
                 "run": site / "runs" / "run-03.html", "benchmark": site / "benchmarks" / "charades_sta.html"}
        for name, html in pages.items():
            page.goto(html.as_uri())
            got = assert_readable(page, PHONE, name)
            assert got["pieces"] > 20, (name, got)
            screenshot(page, f"{name}-390.png", tmp_path)
        assert page.errors() == []
    finally:
        page.send("Emulation.clearDeviceMetricsOverride")


def test_the_layout_check_sees_overlap_spill_and_sideways_scroll(page, tmp_path):  # noqa: F811
    """The probe itself: a page built to overlap, to spill out of a cell and to be too wide is reported so."""
    html = tmp_path / "bad.html"
    html.write_text("""<!doctype html><meta name="viewport" content="width=device-width">
<p style="position:relative">score <span style="position:absolute; left:0">badge</span></p>
<table style="table-layout:fixed; width:120px"><tr><td style="white-space:nowrap">a-very-long-name-that-spills</td>
<td>12.5</td></tr></table><div style="width:600px">wide</div>""")
    set_width(page, PHONE)
    try:
        page.goto(html.as_uri())
        got = layout(page)
        assert got["n_overlaps"] >= 1 and got["n_spills"] >= 1, got
        assert got["view"] > PHONE or got["page"] > PHONE, got  # a phone widens its viewport to the content
    finally:
        page.send("Emulation.clearDeviceMetricsOverride")


# -- without a browser ------------------------------------------------------------------------------------------------
def test_only_settings_that_can_change_a_score_split_runs(tmp_path):
    """A run of fewer samples, a run of another family at its own frame defaults, a greedy run with another seed: one
    config group; another frame count does split, and so does another seed when sampling is not greedy."""
    mc = ("demo-mc",)
    answer = _answers({"demo-mc": 5}, failing=False)
    runs = [make_run(tmp_path / "full", "m-full", answer, benchmarks=mc),
            make_run(tmp_path / "fewer", "m-fewer", answer, benchmarks=mc, keep=6),
            make_run(tmp_path / "qwen3", "m-qwen3", answer, benchmarks=mc, family="qwen3-vl")]
    assert [r.benchmarks["demo-mc"].config_group for r in load_runs(runs)] == [None] * 3
    eight = make_run(tmp_path / "eight", "m-eight", answer, benchmarks=mc, frame_overrides={"max_frames": 8})
    groups = load_runs([*runs, eight])
    assert [r.benchmarks["demo-mc"].config_group for r in groups] == ["A", "A", "A", "B"]
    assert groups[3].benchmarks["demo-mc"].config_note == "frames.max_frames=8"
    base = groups[0].benchmarks["demo-mc"].config
    assert base is not None

    def sampled(**changes: Any) -> ResultConfig:
        return replace(base, sampling=replace(base.sampling, **changes))

    assert comparable(sampled(seed=8), "cards", None) == comparable(base, "cards", None)
    hot = sampled(temperature=0.7)
    assert comparable(hot, "cards", None) != comparable(sampled(temperature=0.7, seed=8), "cards", None)
    assert base.sampling.to_json() == SamplingParams(seed=7).to_dict()  # the config compared is the run's record


def test_long_names_wrap_between_parts_and_chart_labels_keep_what_differs():
    assert str(breakable("Org/a-b_c.d<x>")) == "Org/<wbr>a-<wbr>b_<wbr>c.<wbr>d&lt;x&gt;"
    names = [f"qwen2.5-vl-instruct-video-grpo-temporal-mix-v2-lr1e-6-step-{s}" for s in (1000, 1100, 12000)]
    short = short_labels(names, 36)
    assert all(len(s) <= 36 for s in short) and len(set(short)) == 3
    assert [s.rsplit("-", 1)[1] for s in short] == ["1000", "1100", "12000"]
    assert short_labels(["short", "x" * 50], 36)[0] == "short" and len(short_labels(["x" * 50], 36)[0]) == 36
