"""The whole hostile matrix through one `vbench-async run` with the real vLLM engine (the session's vLLM server: the
in-process engine's own faults are tests/test_resume.py's) and a tiny model: broken videos,
broken records and damaged cache entries in one benchmark. The run must complete, give every sample exactly one
result line (an answer, or a clear recorded error of an expected kind), rebuild every damaged cache entry, render
hostile text literally in prompts, and escape it in the HTML it writes.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from conftest import SERVER_GROUP, run_cli, served_args, wait_for_site
from support.hostile import CACHE_CASES, CARD, JINJA, XSS, build_corpus, run_args, stale_temp_file

from vbench_async.benchmarks import get_benchmark
from vbench_async.frames import FrameCache
from vbench_async.models import family_ref

pytestmark = [pytest.mark.vllm, SERVER_GROUP]

FRAMES = {"max_frames": 4, "max_pixels": 16384}  # what run_args asks for


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, vllm_server):
    root = tmp_path_factory.mktemp("hostile-run")
    corpus = build_corpus(root / "data")
    cache_dir = root / "cache"
    # Fill the cache without an engine, then damage one entry per cache case (and leave a killed writer's file).
    pre = run_cli(*run_args(corpus.data_map, root / "pre", cache_dir, "--mode", "preprocess", "--no-site"))
    assert pre.returncode in (0, 1) and "Traceback" not in pre.stderr, pre.stderr[-3000:]
    spec = get_benchmark(CARD).frame_spec(family_ref("qwen2.5-vl"), FRAMES)
    with FrameCache(cache_dir) as cache:
        entries = {case.name: cache.layout.entry_path(cache.key(corpus.root / "videos" / corpus.cache_videos[case.name],
                                                                spec)) for case in CACHE_CASES}
    assert all(e.is_file() for e in entries.values()), "preprocessing did not cache every video"
    stale_temp_file(entries[CACHE_CASES[0].name])
    for case in CACHE_CASES:
        case.damage(entries[case.name])
    out = root / "out"
    proc = run_cli(*run_args(corpus.data_map, out, cache_dir, *served_args(vllm_server)), timeout=1800)
    if (out / "summary.json").exists():
        wait_for_site(out)  # the run leaves its site to a background process
    lines = []
    for f in (out / "results").glob("*.jsonl"):
        lines += [json.loads(line) for line in f.read_text(encoding="utf-8").split("\n") if line]
    results = {r["sample_id"]: r for r in lines}
    return corpus, proc, lines, results, out, cache_dir


def test_the_run_completes_without_a_traceback(hostile_run):
    corpus, proc, lines, results, out, _ = hostile_run
    assert proc.returncode == 1, proc.stderr[-5000:]  # 1: finished, some samples failed
    assert "Traceback" not in proc.stderr, proc.stderr[-5000:]
    assert "sample(s) failed" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    bench = summary["benchmarks"][CARD]
    assert bench["n_total"] == len(corpus.ids)
    assert bench["n_failed"] == sum(1 for r in lines if r["error"])


def test_every_sample_has_exactly_one_line(hostile_run):
    corpus, _, lines, _, _, _ = hostile_run
    counts = Counter(r["sample_id"] for r in lines)
    assert sorted(counts) == sorted(corpus.ids)
    assert set(counts.values()) == {1}


def test_every_case_ends_as_expected(hostile_run):
    corpus, _, _, results, _, _ = hostile_run
    wrong = {}
    for sid, expect in corpus.ids.items():
        r = results[sid]
        got = r["error"]["kind"] if r["error"] else "ok"
        if got not in expect:
            wrong[corpus.names[sid]] = (got, sorted(expect), (r["error"] or {}).get("message", "")[:200])
        elif got == "ok":
            assert isinstance(r["output"], str) and r["prompt_tokens"] > 0, corpus.names[sid]
        else:
            assert len(r["error"]["message"]) > 10, corpus.names[sid]
    assert not wrong, wrong
    assert len(corpus.ids) >= 60  # videos + records + cache entries


def test_damaged_cache_entries_were_rebuilt_and_verify_accepts_the_cache(hostile_run):
    corpus, _, _, results, _, cache_dir = hostile_run
    for case in CACHE_CASES:
        assert results[f"cache-{case.name}"]["error"] is None, case.name
    verify = run_cli("cache", "verify", "--cache-dir", str(cache_dir))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "0 corrupt" in verify.stdout


def test_hostile_text_reaches_the_model_literally(hostile_run):
    _, _, _, results, _, _ = hostile_run
    jinja = results["rec-jinja_in_question"]
    assert JINJA in jinja["prompt"] and "49" not in jinja["prompt"] and "LOOPLOOP" not in jinja["prompt"]
    assert XSS in results["rec-html_everywhere"]["prompt"]


def test_the_leaderboard_escapes_hostile_text(hostile_run):
    *_, out, _ = hostile_run
    pages = list((out / "leaderboard").rglob("*.html"))
    assert pages
    raw = re.compile(r'<script>alert|<img src=x|onerror="vbXss|LOOPLOOP')  # markup, or an evaluated template
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not raw.search(text), page
    # The text is there, escaped (tables) or as JSON data with "<" written as \u003c.
    shown = "".join(p.read_text(encoding="utf-8") for p in pages)
    assert "&lt;script&gt;alert" in shown or "\\u003cscript\\u003ealert" in shown


def test_a_second_run_has_nothing_to_do(hostile_run, vllm_server):
    """Failures are results too: resuming the hostile run (the same command: the backend kind is part of the config)
    re-runs nothing and sends no request."""
    corpus, _, lines, _, out, cache_dir = hostile_run
    before = {f.name: f.read_bytes() for f in (out / "results").glob("*.jsonl")}
    proc = run_cli(*run_args(corpus.data_map, out, cache_dir, *served_args(vllm_server)))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert {f.name: f.read_bytes() for f in (out / "results").glob("*.jsonl")} == before
