"""The index board at the size of the full suite (22 benchmarks) in a real headless Chromium: it fits a 1440 px
laptop screen without sideways scrolling, ranks by the view's average, switches benchmark groups, searches and filters
by family, and no page shows Python's `None` or `NaN`. Screenshots of the index, a benchmark page and a compare page
go to $VBENCH_SCREENSHOT_DIR (else the test's temporary folder).

The runs are written by the real result store, line builder, scorers and summary writer (test_leaderboard_runs)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest
from test_leaderboard_browser import page  # noqa: F401 - the Chromium tab fixture
from test_leaderboard_runs import make_run

from vbench_async.benchmarks import load_suite
from vbench_async.benchmarks.registry import suite_files
from vbench_async.leaderboard import build_site
from vbench_async.samples import Sample, parse_record

WIDTH = 1440
OPTIONS = ["A. red", "B. blue", "C. green", "D. grey"]


def _suite_samples() -> dict[str, list[Sample]]:
    """Four four-option questions for each of the 22 benchmarks of suite `all` (their own data is not at hand)."""
    bids = load_suite(suite_files()["all"])[1]
    rec = {"problem": "Which colour is the ball?", "problem_type": "multiple choice", "options": OPTIONS}
    return {bid: [parse_record({**rec, "solution": f"<answer>{'ABCD'[i]}</answer>", "problem_id": i,
                                "path": f"v{i}.mp4"}, bid, i) for i in range(4)] for bid in bids}


def _right(sample: Sample, i: int) -> str:
    return f"The answer is {sample.answer}"


def _half(sample: Sample, i: int) -> str:
    return _right(sample, i) if i % 2 else "I think it is A, but " + "the ball moves left and right. " * 12


def _noise(sample: Sample, i: int) -> str:
    return "zq xv lorem ipsum kk"  # a random-weight model's output: no answer in it


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("board")
    samples = _suite_samples()
    common = dict(benchmarks=tuple(samples), samples=samples)
    runs = [make_run(root / "strong", "Qwen3-VL-8B-Instruct-long-name-for-wrapping", _right, family="qwen3-vl",
                     **common),
            make_run(root / "mid", "model-mid", _half, **common),
            make_run(root / "mid16", "model-mid", _half, frame_overrides={"max_frames": 16}, **common),
            make_run(root / "tiny", "tiny-qwen2.5-vl", _noise, **common)]
    return build_site(runs, root / "site")


def _screenshot(page, name: str, tmp_path: Path) -> Path:  # noqa: F811
    shot = base64.b64decode(page.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    out = Path(os.environ.get("VBENCH_SCREENSHOT_DIR", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(shot)
    return out / name


@pytest.fixture
def laptop(page):  # noqa: F811
    page.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
    yield page
    page.send("Emulation.clearDeviceMetricsOverride")


def test_index_at_22_benchmarks_fits_1440_px_without_sideways_scroll(laptop, board, tmp_path):
    laptop.goto((board / "index.html").as_uri())
    shown = laptop.js("Array.from(document.querySelectorAll('#leaderboard thead th.benchmark'))"
                      ".filter(t => t.offsetParent !== null).length")
    assert shown == 22
    sizes = laptop.js("({page: document.documentElement.scrollWidth, view: window.innerWidth, "
                      "table: document.querySelector('.scroll').scrollWidth, "
                      "box: document.querySelector('.scroll').clientWidth})")
    assert sizes["page"] <= sizes["view"] == WIDTH, sizes
    assert sizes["table"] <= sizes["box"], sizes  # nor inside the table's own scroll box
    # every name is shown whole (wrapped between its parts if need be), never cut
    names = laptop.js("Array.from(document.querySelectorAll('#leaderboard tbody td.model')).map(td => "
                      "[td.dataset.v, td.querySelector('a.name').textContent, "
                      "td.querySelector('a.name').scrollWidth <= td.querySelector('a.name').clientWidth])")
    assert names and all(v == text and whole for v, text, whole in names), names
    _screenshot(laptop, "index-22.png", tmp_path)
    assert laptop.errors() == []


def test_board_ranks_by_the_view_average_and_filters(laptop, board):
    laptop.goto((board / "index.html").as_uri())
    rows = "Array.from(document.querySelectorAll('#leaderboard tbody tr')).filter(r => r.offsetParent !== null)"
    ranked = laptop.js(f"{rows}.map(r => [r.cells[1].dataset.v, r.cells[0].textContent])")
    assert dict(ranked)["Qwen3-VL-8B-Instruct-long-name-for-wrapping"] == "1"
    facts = laptop.js("Object.fromEntries(Array.from(document.querySelectorAll('#leaderboard thead th.meta'))"
                      ".map(th => [th.dataset.meta, th.offsetParent !== null]))")
    assert facts == {"family": True, "frames": False, "recipe": False, "revision": False, "date": False}, facts
    family = laptop.js("document.querySelector('#leaderboard tbody td[data-meta=\"family\"]').textContent")
    assert family == "qwen3-vl"  # the model-fact columns: family shown; the ones no run recorded left out
    # a group view: only its benchmarks and its average are shown
    views = json.loads((board / "index.html").read_text().split('id="board-views">')[1].split("</script>")[0])
    mc = next(i for i, v in enumerate(views) if v["name"] == "mc")
    laptop.js(f"(e => {{ e.value = '{mc}'; e.dispatchEvent(new Event('change')); }})"
              "(document.getElementById('board-view'))")
    visible = laptop.js("Array.from(document.querySelectorAll('#leaderboard thead th[data-col]'))"
                        ".filter(t => t.offsetParent !== null).map(t => t.dataset.col)")
    assert visible == [*views[mc]["members"], "avg: mc"]
    # search and family filter
    laptop.js("(e => { e.value = 'qwen3'; e.dispatchEvent(new Event('input')); })(document.getElementById('board-q'))")
    assert laptop.js("document.getElementById('board-count').textContent") == "1 of 4 runs"
    laptop.js("(e => { e.value = ''; e.dispatchEvent(new Event('input')); })(document.getElementById('board-q'))")
    laptop.js("(e => { e.value = 'qwen2.5-vl'; e.dispatchEvent(new Event('change')); })"
              "(document.getElementById('board-family'))")
    assert laptop.js("document.getElementById('board-count').textContent") == "3 of 4 runs"
    # the chance row: four options, 25 %
    assert laptop.js("document.querySelector('#leaderboard tfoot td[data-col=\"holmes\"]').textContent") == "25.0"
    assert laptop.errors() == []


def test_no_page_shows_none_or_nan_and_marks_are_explained(laptop, board, tmp_path):
    pages = sorted(board.rglob("*.html"))
    assert len(pages) > 40
    for html in pages:
        laptop.goto(html.as_uri())
        # the run pages' raw summary.json/manifest.json (pre.json) are the files verbatim: left out of the check
        text = laptop.js("(() => { document.querySelectorAll('pre.json').forEach(p => p.style.display = 'none'); "
                         "return document.body.innerText; })()")
        leak = re.search(r"\b(None|NaN|undefined)\b", text)
        assert leak is None, (html.relative_to(board), text[max(0, leak.start() - 60): leak.end() + 20])
        if "†" in text:  # a mark is explained on the page (a legend, a chart note) or in the index's legend
            assert "not directly comparable" in text, html.relative_to(board)
        assert laptop.errors() == [], html.relative_to(board)
    labels_fit = ("Array.from(document.querySelectorAll('svg text.label')).map(t => "
                  "t.getBoundingClientRect().left - t.ownerSVGElement.getBoundingClientRect().left)")
    laptop.goto((board / "benchmarks" / "holmes.html").as_uri())
    assert "Chance level: 25.0" in laptop.js("document.getElementById('chance').textContent")
    lefts = laptop.js(labels_fit)
    assert len(lefts) >= 4 and min(lefts) >= 0, lefts  # the long model name is cut inside the chart, not clipped
    _screenshot(laptop, "benchmark.png", tmp_path)
    compare = next(p for p in pages if p.parent.name == "compare" and "strong--tiny" in p.name)
    laptop.goto(compare.as_uri())
    assert min(laptop.js(labels_fit) or [0]) >= 0
    truths = laptop.js("Array.from(document.querySelectorAll('table.flipped td.truth')).map(t => t.textContent)")
    assert truths and set(truths) <= set("ABCD")  # the answer, not `<answer>A</answer>`
    _screenshot(laptop, "compare.png", tmp_path)
    assert laptop.errors() == []
