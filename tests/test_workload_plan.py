"""`vbench-async plan` and the engine sized from it: exact prompt lengths (against the in-process vLLM engine's own
counts), headers probed once per content, a sample that cannot fit recorded as context_overflow before any engine
starts, a benchmark whose samples all failed never shown as a complete 0.00, and a suite that runs what has data."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from conftest import DEMO_ARGS, ENGINE_GROUP, outputs, run_cli
from support.videos import write_video

from vbench_async.cli.output import print_table
from vbench_async.models import family_ref
from vbench_async.results.summaries import benchmark_status
from vbench_async.workload.probe import HeaderStore
from vbench_async.workload.sizing import requests_in_flight, size_engine
from vbench_async.workload.tokens import ModelLimits

LIMITS = ModelLimits(max_position_embeddings=32768, num_layers=2, num_kv_heads=1, head_dim=64, kv_dtype_bytes=2)


def test_the_plan_command_needs_no_engine(tmp_path):
    proc = run_cli("plan", "--model", "tiny-qwen2.5-vl", "--suite", "demo", "--cache-dir", str(tmp_path / "cache"),
                   "--json", "--max-tokens", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    assert plan["fits"] and plan["engine"]["source"] == "sized" and plan["engine"]["kv_bytes_per_token"] == 512
    bench = plan["benchmarks"]["demo-mc"]
    assert bench["n_samples"] == bench["n_planned"] == 11 and bench["frames"]["max"] == 32
    assert bench["largest_context"] == bench["prompt_tokens"]["max"] + 12
    assert plan["engine"]["max_model_len"] >= max(b["largest_context"] for b in plan["benchmarks"].values())
    assert plan["cache_bytes_to_write"] > 0 and plan["free_disk_bytes"] > 0
    table = run_cli("plan", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-ocr", "--cache-dir",
                    str(tmp_path / "cache"))
    assert "demo-ocr" in table.stdout and "largest context" in table.stdout and "engine: max_model_len" in table.stdout


@ENGINE_GROUP
@pytest.mark.vllm
def test_planned_prompt_lengths_are_the_engines(qwen25_runs):
    """Every demo sample: the plan's prompt length equals what the in-process vLLM engine reported (Qwen2.5-VL)."""
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.runner import RunConfig, plan

    tmp, first, _ = qwen25_runs
    assert first.returncode == 0, first.stderr[-3000:]
    # The console has the one start-up line; every benchmark's plan line is in the run's log.
    assert "(sized; model limit 32,768)" in first.stdout and "plan demo-mc:" not in first.stdout
    assert "plan demo-mc: 11 sample(s)" in (tmp / "a" / "logs" / "engine.log").read_text()
    workload = plan(RunConfig(model="tiny-qwen2.5-vl", selection=Selection(suite="demo"), cache_dir=tmp / "cache"))
    engine = outputs(tmp / "a", "prompt_tokens")
    assert len(engine) == 66
    assert {k: workload.prompt_tokens[k] for k in engine} == engine


def test_a_benchmark_that_cannot_fit_is_reported_before_any_engine(tmp_path):
    """An explicit --max-model-len too small for the cards' frames: every sample is recorded as context_overflow with
    its token count, the plan names the fix, no engine starts, and the table says ALL FAILED, not complete 0.00.
    mmvu has no data under the (empty) data root: the rest runs, and the run says mmvu was not run."""
    out = tmp_path / "out"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc,mmvu", "--max-samples", "3",
                   "--max-model-len", "300", *DEMO_ARGS[2:], "--output-dir", str(out), "--data-root",
                   str(tmp_path / "no-data"), "--cache-dir", str(tmp_path / "cache"), "--no-site", timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "3 do NOT fit (context_overflow); fix: " in proc.stdout and "--max-frames" in proc.stdout
    assert "plan mmvu: NOT RUN: no annotations for 'mmvu'" in proc.stdout
    results = [json.loads(line) for f in (out / "results").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(results) == 3
    for r in results:
        assert r["error"]["kind"] == "context_overflow" and "tokens" in r["error"]["message"], r["error"]
    summary = json.loads((out / "summary.json").read_text())
    block = summary["benchmarks"]["demo-mc"]
    assert block["status"] == "failed" and block["score"] is None and block["n_failed"] == 3
    assert summary["not_run"].keys() == {"mmvu"} and summary["complete"] is False
    assert summary["run"]["backend"]["backend"] == "none"  # nothing to send: no engine was started
    assert "ALL FAILED" in proc.stdout and "NOT RUN (no data)" in proc.stdout and "0.00" not in proc.stdout


def test_the_engine_is_sized_from_the_plan():
    sized = size_engine(largest_prompt=18_000, largest_item=17_280, largest_video=(256, 288, 480), max_tokens=256,
                        limits=LIMITS, explicit_max_model_len=None, explicit_batched_tokens=None, concurrency=4)
    assert sized.source == "sized" and 18_256 + 64 <= sized.max_model_len <= 18_256 + 64 + 256
    assert sized.max_num_batched_tokens == 17_280 and sized.fits_model
    assert sized.kv_bytes_per_sequence == 18_256 * 512 and sized.kv_bytes_at_concurrency == 4 * 18_256 * 512
    explicit = size_engine(largest_prompt=18_000, largest_item=300, largest_video=None, max_tokens=256, limits=LIMITS,
                           explicit_max_model_len=8192, explicit_batched_tokens=None, concurrency=4)
    assert explicit.max_model_len == 8192 and explicit.source == "explicit" and explicit.max_num_batched_tokens is None
    capped = size_engine(largest_prompt=40_000, largest_item=0, largest_video=None, max_tokens=256, limits=LIMITS,
                         explicit_max_model_len=None, explicit_batched_tokens=None, concurrency=1)
    assert capped.max_model_len == 32768 and not capped.fits_model


def test_requests_in_flight_fill_the_engine_within_a_share_of_memory():
    """The in-process engine is given every pending request whose frames (uint8 here, float32 in the engine) fit in a
    quarter of the memory, never fewer than it runs at once."""
    gib = 1 << 30
    small = (16, 352, 640)  # perf/e2e.py's largest video: 10.8 MB of pixels, 54 MB in flight
    assert requests_in_flight(running=16, largest_video=small, pending=100, memory_bytes=24 * gib) == 100
    assert requests_in_flight(running=16, largest_video=small, pending=500, memory_bytes=24 * gib) == 119
    assert requests_in_flight(running=16, largest_video=small, pending=10, memory_bytes=24 * gib) == 16
    assert requests_in_flight(running=16, largest_video=small, pending=5000, memory_bytes=4 * gib) == 19
    big = (768, 448, 448)  # a long video at a real budget: 2.3 GB in flight each, 14 in 32 GiB
    assert requests_in_flight(running=16, largest_video=big, pending=5000, memory_bytes=128 * gib) == 16
    assert requests_in_flight(running=8, largest_video=None, pending=100_000, memory_bytes=None) == 1024
    assert requests_in_flight(running=16 * 8, largest_video=big, pending=5000, memory_bytes=128 * gib) == 128


def test_headers_are_probed_once_per_content(tmp_path):
    clip = write_video(tmp_path / "a.mp4", frames=30, fps=10, width=64, height=48)
    copy = tmp_path / "b.mp4"
    shutil.copy(clip, copy)
    first = HeaderStore(tmp_path / "cache")
    got = first.headers([clip, copy, tmp_path / "missing.mp4"])
    assert first.probed == 1  # the copy has the same content: one probe
    assert (got[clip].total_frames, got[clip].fps, got[clip].width, got[clip].height) == (30, 10.0, 64, 48)
    assert got[copy] == got[clip] and got[tmp_path / "missing.mp4"].kind == "video_missing"
    again = HeaderStore(tmp_path / "cache")
    assert again.headers([clip, copy])[clip] == got[clip] and again.probed == 0


def test_a_benchmark_whose_samples_all_failed_is_not_complete():
    assert benchmark_status({"complete": True, "n_total": 3, "n_failed": 3}) == "failed"
    assert benchmark_status({"complete": True, "n_total": 3, "n_failed": 1}) == "partial"  # not "complete"
    assert benchmark_status({"complete": True, "n_total": 3, "n_failed": 0}) == "complete"
    assert benchmark_status({"complete": False, "n_total": 2, "n_failed": 0}) == "partial"
    buf = io.StringIO()
    print_table({"benchmarks": {"x": {"score": 0.0, "n_total": 3, "n_failed": 3, "complete": True}},
                 "not_run": {"y": "no annotations"}}, file=buf)
    assert "ALL FAILED" in buf.getvalue() and "0.00" not in buf.getvalue() and "NOT RUN" in buf.getvalue()


def test_the_plans_cache_bytes_are_what_the_cache_will_write(tmp_path):
    """The plan's frame-cache bytes come from the cache's own fit check: with nothing cached, the codec's assumed
    ratio (and the plan says it is assumed); with an entry cached, the ratio measured on it, which predicts the size
    of the next entry of the same kind of footage. Before, the plan counted raw uint8 frames for zstd entries."""
    from vbench_async.benchmarks import get_benchmark
    from vbench_async.frames import FrameCache
    from vbench_async.frames.disk_budget import PLANNING_RATIO
    from vbench_async.frames.worker import handle
    from vbench_async.workload.plan import estimate_cache, video_geometry
    from vbench_async.workload.probe import probe_video

    spec = get_benchmark("mmvu").frame_spec(family_ref("qwen2.5-vl"), {"max_frames": 8, "max_pixels": 16384})
    cache = FrameCache(tmp_path / "cache")
    clips = [write_video(tmp_path / f"v{i}.mp4", frames=48, fps=12, width=128, height=96, textured=True, seed=i)
             for i in range(2)]
    keys = [cache.key(c, spec) for c in clips]

    def decode(i: int) -> tuple[int, int]:  # (raw frame bytes, entry bytes) of clip i, decoded into the cache
        path = cache.layout.entry_path(keys[i])
        assert handle({"id": keys[i], "video": str(clips[i]), "fingerprint": cache.fingerprint(clips[i]),
                       "spec": spec.to_dict(), "window": None,
                       "decoder": cache.decoder, "codec": cache.codec, "out": str(path)})["ok"]
        return cache.get(clips[i], spec).frames.nbytes, path.stat().st_size

    g = video_geometry(probe_video(clips[0]), spec, None)
    raw_size = g.frames * g.height * g.width * 3  # what the plan counts for these clips (the cache's, checked below)
    cold, cold_bytes = estimate_cache(cache.root, {keys[0]: raw_size}, {keys[0]}, cache.codec, None)
    assert cold.codec == "zstd" and cold.ratio == PLANNING_RATIO["zstd"] and "assumed" in cold.ratio_source
    assert cold_bytes == int(raw_size * PLANNING_RATIO["zstd"]) < raw_size
    raw0, stored0 = decode(0)
    assert raw0 == raw_size
    warm, warm_bytes = estimate_cache(cache.root, {k: raw_size for k in keys}, {keys[1]}, cache.codec, None)
    assert "measured" in warm.ratio_source and warm.ratio == round(stored0 / raw0, 4)
    _, stored1 = decode(1)
    assert abs(warm_bytes - stored1) <= 0.25 * stored1, (warm_bytes, stored1)
    assert warm.fits_disk and warm.warnings == []
    over, _ = estimate_cache(cache.root, {k: raw_size for k in keys}, set(), cache.codec, max_bytes=stored0 // 2)
    assert over.warnings and "budget" in over.warnings[0]
