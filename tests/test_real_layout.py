"""Real workloads: the reference annotation records of every benchmark (../shared; skipped where absent) laid out as a
data root, 150 s clips at every video path, and `vbench-async run --suite all` with every card's default frames (256
frames, 262,144 px per frame) on tiny Qwen3-VL with the real in-process vLLM engine. Every sample must get a result,
none may fail for context or engine reasons, the engine must be sized from the plan, the benchmarks without data
must be named as not run, and the plan's prompt lengths must be the engine's to the token.

Cheap by construction: one record per benchmark (all 25, two clip contents, under -m slow), one clip content
hard-linked everywhere
(one decode and one vision-encoder pass per content; vLLM's prefix cache serves the rest of each ~18k-token prompt).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, shared_dir
from support.real_layout import lay_out

from vbench_async.benchmarks import resolve_benchmarks
from vbench_async.results.lines import read_lines

# Its own engine run, shared by its tests (a group: one build), on whichever worker is free; not the shared one.
pytestmark = [pytest.mark.vllm, pytest.mark.xdist_group("real_layout")]

MODEL = "tiny-qwen3-vl"
# Small queue: every distinct path is its own group, holding a 100 MB frame array while it waits.
RUN_ARGS = ("--max-tokens", "16", "--no-progress", "--workers", "1", "--concurrency", "4", "--queue-size", "4",
            "--no-site")
NOT_CONTEXT_OR_ENGINE = ("engine_error", "context_overflow", "server_error")


def _layout_run(tmp_path_factory, per_benchmark, clips):
    annotations = shared_dir("reference-annotations")
    root = tmp_path_factory.mktemp("real-layout")
    written = lay_out(root / "data", annotations, resolve_benchmarks("all", None), per_benchmark, clips)
    common = ("--model", MODEL, "--suite", "all", "--data-root", str(root / "data"), "--cache-dir",
              str(root / "cache"))
    plan = run_cli("plan", *common, "--json", "--max-tokens", "16", "--concurrency", "4")
    proc = run_cli("run", *common, "--output-dir", str(root / "run"), *RUN_ARGS, timeout=3000)
    return root, written, plan, proc


@pytest.fixture(scope="module")
def layout_run(tmp_path_factory):
    return _layout_run(tmp_path_factory, per_benchmark=1, clips=1)


def _results(run_dir):
    out = {}
    for f in sorted((run_dir / "results").glob("*.jsonl")):
        for sid, r in read_lines(f).items():
            out[f"{r['benchmark']}/{sid}"] = r
    return out


def check_layout_run(root, written, plan, proc):
    assert "Traceback" not in proc.stderr, proc.stderr[-5000:]
    summary = json.loads((root / "run" / "summary.json").read_text())
    absent = {b.id for b in resolve_benchmarks("all", None)} - set(written)
    # The suite ran what has data and says what did not run: plan lines, table, summary, exit code.
    assert set(summary.get("not_run", {})) == absent and summary["complete"] is False
    assert proc.returncode == (1 if absent else 0), proc.stderr[-3000:]
    for bid in absent:
        assert f"plan {bid}: NOT RUN" in proc.stdout and "NOT RUN (no data)" in proc.stdout
    log = (root / "run" / "logs" / "engine.log").read_text()
    for bid in written:
        assert f"plan {bid}: " in log
    assert "(sized; model limit 32,768)" in proc.stdout
    results = _results(root / "run")
    assert len(results) == sum(written.values())
    bad = {k: r["error"] for k, r in results.items() if r["error"] and r["error"]["kind"] in NOT_CONTEXT_OR_ENGINE}
    assert not bad, bad
    others = {k: r["error"]["kind"] for k, r in results.items() if r["error"]}
    assert not others, others  # the records are valid and every clip decodes: every sample is answered
    for bid, n in written.items():
        block = summary["benchmarks"][bid]
        assert block["n_total"] == n and block["status"] == "complete", (bid, block)
    # The plan's prompt lengths are the engine's, to the token (Qwen3-VL timestamps, every card's template).
    planned = json.loads(plan.stdout)
    assert plan.returncode == (1 if absent else 0) and planned["engine"]["source"] == "sized", plan.stderr[-3000:]
    assert set(planned["not_run"]) == absent
    for bid in written:
        top = max(r["prompt_tokens"] for k, r in results.items() if k.startswith(f"{bid}/"))
        assert planned["benchmarks"][bid]["prompt_tokens"]["max"] == top, bid
        assert planned["benchmarks"][bid]["frames"]["max"] == 256  # the cards' cap (windowed records take fewer)
    return summary, results


def test_every_real_record_runs_at_card_frames(layout_run):
    summary, results = check_layout_run(*layout_run)
    assert min(r["prompt_tokens"] for r in results.values()) > 15000  # real-length prompts, not short clips


def test_plan_counts_every_prompt_exactly(layout_run):
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.runner import RunConfig, plan

    root, written, _, _ = layout_run
    workload = plan(RunConfig(model=MODEL, selection=Selection(suite="all", data_root=root / "data"),
                              cache_dir=root / "cache"))
    results = _results(root / "run")
    assert {k: workload.prompt_tokens.get(k) for k in results} == {k: r["prompt_tokens"] for k, r in results.items()}


@pytest.mark.slow
def test_every_real_record_of_every_benchmark(tmp_path_factory):
    check_layout_run(*_layout_run(tmp_path_factory, per_benchmark=None, clips=2))
