"""The leaderboard groups runs by model family and shows each score's frame settings (count, fixed side or pixel
cap) beside it, in the page and in the CSV export."""

from __future__ import annotations

import csv

from test_leaderboard_runs import make_run, right

from vbench_async.leaderboard import build_site


def test_runs_are_grouped_by_family_with_frame_settings(tmp_path):
    runs = [make_run(tmp_path / "q-a", "qwen-a", right, benchmarks=("demo-mc",)),
            make_run(tmp_path / "iv", "internvl-b", right, benchmarks=("demo-mc",), family="internvl",
                     frame_overrides={"side": 112, "nframes": 8}),
            make_run(tmp_path / "q-c", "qwen-c", right, benchmarks=("demo-mc",))]
    site = build_site(runs, tmp_path / "site")
    with open(site / "data" / "leaderboard.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "benchmark"]
    assert [(r["model"], r["family"]) for r in rows] == [
        ("qwen-a", "qwen2.5-vl"), ("qwen-c", "qwen2.5-vl"), ("internvl-b", "internvl")]
    assert rows[0]["frames"] == "2 fps, 4-32 f, <=65536 px" and rows[2]["frames"] == "8 f, 112 px"
    page = (site / "index.html").read_text()
    order = [page.index(f'class="family">{f}<') for f in ("qwen2.5-vl", "internvl")]
    assert order == sorted(order) and page.count('class="family">') == 3
    assert 'class="frames">8 f, 112 px</span>' in page  # the row's metadata names its frames
