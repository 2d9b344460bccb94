"""The site in a real headless Chromium (Debian's `chromium`; `scripts/install_browser.sh` installs it), driven over
the Chrome DevTools Protocol: pages load from file:// with no console errors, the table sorts, the sample browser
filters, hostile model output is shown as text, and a screenshot is taken."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import ENGINE_GROUP, stop
from test_leaderboard_runs import XSS, make_frame_runs, runs_under_test, with_hostile_output

from vbench_async.frames.cache import FrameCache
from vbench_async.leaderboard import build_site

pytestmark = ENGINE_GROUP  # shares the tiny-model demo run (qwen25_runs) with the other engine tests
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for exe in BROWSERS:
        path = shutil.which(exe)
        if path:
            return path
    pytest.skip("no Chromium on PATH: run scripts/install_browser.sh (the Makefile's test target does)")


class Page:
    """One tab over CDP: send commands, collect console errors and exceptions as they arrive."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))

    def goto(self, url: str) -> None:
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} threw: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self) -> list[str]:
        self.js("0")  # drain events that arrived before this point
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out


@pytest.fixture(scope="module")
def site(tmp_path_factory, qwen25_runs) -> dict[str, Any]:
    """A site over the runs under test, a real tiny-model run of `vbench-async run` (vLLM engine, demo suite), and a
    copy of the first run that answered one sample with HTML/script."""
    root = tmp_path_factory.mktemp("browser")
    runs = [*runs_under_test(root / "runs"), qwen25_runs[0] / "a"]
    hostile, bid, sid = with_hostile_output(runs[0], root / "runs-extra" / "hostile")
    out = build_site([*runs, hostile], root / "site")
    return {"dir": out, "hostile_benchmark": bid, "hostile_sample": sid}


@pytest.fixture(scope="module")
def frames_site(tmp_path_factory, qwen25_runs) -> Path:
    """A site of runs whose lines record their frames: three demo-mc runs over a real frame cache (one at a smaller
    frame budget) and the tiny-model vLLM run, whose cache evicted most entries (its strips come from the videos)."""
    root = tmp_path_factory.mktemp("browser-frames")
    with FrameCache(root / "cache", workers=2) as cache:
        runs = make_frame_runs(root / "runs", cache)
    return build_site([*runs, qwen25_runs[0] / "a"], root / "site")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    exe = _browser()
    connect = pytest.importorskip("websockets.sync.client").connect
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--remote-debugging-port=0",
         "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"  # the browser writes the port it picked here
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        tab = next(t for t in targets if t.get("type") == "page")
        with connect(tab["webSocketDebuggerUrl"], max_size=None, open_timeout=20) as ws:
            yield Page(ws)
    finally:
        stop(proc, 10)


def _first_column(page: Page, table: str, index: int = 0) -> list[str]:
    return page.js(f"Array.from(document.querySelectorAll('{table} tbody tr')).map(r => r.cells[{index}].dataset.v)")


def _embedded(page: Page, element_id: str) -> Any:
    return page.js(f"JSON.parse(document.getElementById('{element_id}').textContent)")


def _expected_order(labels: list[str], scores: list[float | None], descending: bool) -> list[str]:
    """Stable sort with missing scores last, as a reader expects."""
    present = [(lab, sc) for lab, sc in zip(labels, scores) if sc is not None]
    present.sort(key=lambda x: x[1], reverse=descending)  # Python's sort is stable in both directions
    return [lab for lab, _ in present] + [lab for lab, sc in zip(labels, scores) if sc is None]


def test_table_sorts_without_console_errors(page, site):
    out = site["dir"]
    page.goto((out / "index.html").as_uri())
    board = json.loads((out / "data" / "leaderboard.json").read_text())
    labels = list(dict.fromkeys(r["model"] for r in board))
    assert _first_column(page, "#leaderboard", 1) == labels  # the order the runs were given
    column = next(r["column"] for r in board if r["kind"] == "benchmark")
    scores = [next((r["score"] for r in board if r["model"] == lab and r["column"] == column), None) for lab in labels]
    header = f"Array.from(document.querySelectorAll('#leaderboard thead th')).find(t => t.querySelector('button')" \
             f".textContent === {json.dumps(column)})"
    page.js(f"{header}.querySelector('button').click()")  # first click on a number column: best first
    assert page.js(f"{header}.getAttribute('aria-sort')") == "descending"
    assert _first_column(page, "#leaderboard", 1) == _expected_order(labels, scores, descending=True)
    page.js(f"{header}.querySelector('button').click()")
    assert _first_column(page, "#leaderboard", 1) == _expected_order(labels, scores, descending=False)
    page.js("document.querySelectorAll('#leaderboard thead th')[1].querySelector('button').click()")  # model
    assert _first_column(page, "#leaderboard", 1) == sorted(labels, key=str.lower)
    assert page.js("document.querySelectorAll('svg rect.bar').length") >= 1  # a chart (suite averages)
    assert page.errors() == []


def _outcome(row: dict[str, Any]) -> str:
    if row["error_kind"]:
        return "failed"
    if row["score"] is None:
        return "unscored"
    return "correct" if row["score"] >= 1 else "wrong" if row["score"] <= 0 else "partial"


def test_sample_browser_filters_and_shows_html_as_text(page, site, tmp_path):
    from vbench_async.leaderboard.site import slug

    page.goto((site["dir"] / "samples" / f"{slug(site['hostile_benchmark'])}.html").as_uri())
    rows = _embedded(page, "sample-data")
    n = len(rows)
    count = "document.getElementById('count').textContent"
    assert page.js(count) == f"{n} of {n} results" and n > 1

    def filter_by(**values: str) -> str:
        for element, value in values.items():
            event = "input" if element == "q" else "change"
            page.js(f"(e => {{ e.value = {json.dumps(value)}; e.dispatchEvent(new Event('{event}')); }})"
                    f"(document.getElementById('{element}'))")
        return page.js(count)

    hostile = sum(1 for r in rows if "window.__pwned" in (r["output"] or ""))
    assert hostile >= 1 and filter_by(q="window.__pwned") == f"{hostile} of {n} results"
    outputs = page.js("Array.from(document.querySelectorAll('#samples tbody td.output')).map(c => c.textContent)")
    assert outputs == [XSS] * hostile  # exactly the model's text, shown as text
    ids = page.js("Array.from(document.querySelectorAll('#samples tbody td.mono')).map(c => c.textContent)")
    assert site["hostile_sample"] in ids
    assert page.js("typeof window.__pwned") == "undefined"  # neither the script nor onerror ran
    assert page.js("document.querySelectorAll('#samples tbody b, #samples tbody img:not(.thumb), #samples tbody i')"
                   ".length") == 0

    for outcome in ("wrong", "correct", "failed"):
        expected = sum(1 for r in rows if _outcome(r) == outcome)
        assert filter_by(q="", run="", outcome=outcome) == f"{expected} of {n} results", outcome
    run_id = rows[-1]["run"]
    expected = sum(1 for r in rows if r["run"] == run_id and _outcome(r) == "failed")
    assert filter_by(outcome="failed", run=run_id) == f"{expected} of {n} results"
    assert filter_by(outcome="", run="") == f"{n} of {n} results"
    shown = page.js("document.querySelectorAll('#samples tbody tr').length")
    assert shown == min(n, 50)  # one page at a time

    shot = page.send("Page.captureScreenshot", format="png")
    png = base64.b64decode(shot["data"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    out_dir = Path(os.environ.get("VBENCH_SCREENSHOT_DIR", tmp_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "samples.png").write_bytes(png)
    assert page.errors() == []


def test_every_page_loads_cleanly(page, site):
    for html in sorted(site["dir"].rglob("*.html")):
        page.goto(html.as_uri())
        assert page.js("document.readyState") == "complete"
        assert page.errors() == [], html.relative_to(site["dir"])
    # the error collector is live: a console error is seen
    page.js("console.error('probe')")
    assert page.errors() == ["probe"]
    page.events.clear()


# Resolves when every image on the page has loaded or failed; then: per table row, how many images decoded.
_IMAGES_PER_ROW = """(async () => {
  const imgs = Array.from(document.querySelectorAll('img.thumb'));
  await Promise.all(imgs.map(i => i.complete ? 0 : new Promise(r => { i.onload = r; i.onerror = r; })));
  return Array.from(document.querySelectorAll('TABLE tbody tr')).map(tr =>
    Array.from(tr.querySelectorAll('img.thumb')).filter(i => i.complete && i.naturalWidth > 0).length);
})()"""


def test_sample_pages_show_the_frames_each_video_sample_received(page, frames_site):
    origins = set()
    for html in sorted((frames_site / "samples").glob("*.html")):
        page.goto(html.as_uri())
        rows = _embedded(page, "sample-data")
        origins |= {r["frames"]["origin"] for r in rows if r["frames"]}
        # Every sample here has a video: each line that got as far as loading frames has its strip.
        assert rows and all(r["frames"] and not r["frames"]["missing"] for r in rows if not r["error_kind"])
        shown, expected = [], []
        for run in dict.fromkeys(r["run"] for r in rows):  # one run at a time: one page of rows each
            page.js(f"(e => {{ e.value = {json.dumps(run)}; e.dispatchEvent(new Event('change')); }})"
                    "(document.getElementById('run'))")
            shown += page.js(_IMAGES_PER_ROW.replace("TABLE", "#samples"))
            expected += [bool(r["frames"]) for r in rows if r["run"] == run]
        assert len(shown) == len(rows) and sum(expected) >= len(rows) // 2, html.name
        assert all(n >= 1 for n, has in zip(shown, expected) if has), html.name  # a decoded image per video sample
        assert page.errors() == [], html.name
    # The vLLM run's cache evicted most entries: they come from another cache holding the same key, or its videos.
    assert origins and origins <= {"frame cache", "video file"}
    page.goto((frames_site / "samples" / "demo-mc.html").as_uri())
    assert page.js("document.querySelectorAll('.timeline .window').length") >= 1  # the clip window is marked


def test_compare_page_lists_flipped_samples_with_their_frames(page, frames_site, tmp_path):
    page.goto((frames_site / "index.html").as_uri())
    links = page.js("Array.from(document.querySelectorAll('#compares a')).map(a => a.getAttribute('href'))")
    assert "compare/frames-a--frames-b.html" in links
    page.goto((frames_site / "compare" / "frames-a--frames-b.html").as_uri())
    ids = page.js("Array.from(document.querySelectorAll('table.flipped tbody td.mono')).map(c => c.textContent)")
    assert ids == ["mc-0000", "mc-0003"]  # model-b answered these wrong (every_third_wrong), model-a right
    per_row = page.js(_IMAGES_PER_ROW.replace("TABLE", "table.flipped"))
    assert len(per_row) == 2 and min(per_row) >= 1
    assert page.js("document.querySelectorAll('svg rect.bar').length") >= 2  # accuracy by category, both runs
    shot = base64.b64decode(page.send("Page.captureScreenshot", format="png")["data"])
    out_dir = Path(os.environ.get("VBENCH_SCREENSHOT_DIR", tmp_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compare.png").write_bytes(shot)
    assert page.errors() == []
