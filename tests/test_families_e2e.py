"""Every non-Qwen family through `vbench-async run --suite demo` on the real in-process vLLM engine and on the HF
backend (the Qwen families have their own end-to-end runs: tests/test_e2e_vllm.py and the `qwen25_runs` fixture).

Per family: both runs finish every sample; the prompt length each engine reports equals the planner's count from the
family's placeholder rule, and the two engines agree; the frames the run cached are the source frames the family's
reference takes (tests/support/family_checks.py), at the size its config gives. Three vLLM starts (~45 CPU-s each):
under -m slow; tests/test_families.py holds the cheap default-suite check of the same rules per family."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ENGINE_GROUP, outputs, run_cli
from support.family_checks import REFERENCE_INDICES

from vbench_async import families, models

pytestmark = [pytest.mark.slow, pytest.mark.vllm, ENGINE_GROUP]

NEW_FAMILIES = [f for f in families.registry().values() if not f.name.startswith("qwen")]
ARGS = ("--suite", "demo", "--max-samples", "1", "--max-tokens", "4", "--no-progress", "--workers", "1")


@pytest.mark.parametrize("family", NEW_FAMILIES, ids=lambda f: f.name)
def test_family_runs_on_vllm_and_hf_as_its_rules_say(family: families.Family, tmp_path: Path) -> None:
    from vbench_async.benchmarks import resolve_benchmarks
    from vbench_async.benchmarks.selection import Selection
    from vbench_async.evaluation.runner import RunConfig, plan
    from vbench_async.frames import FrameCache

    cache = tmp_path / "cache"
    reported = {}
    for backend in ("vllm", "hf"):
        done = run_cli("run", "--model", family.tiny_model, *ARGS, "--backend", backend,
                       "--output-dir", str(tmp_path / backend), "--cache-dir", str(cache), timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        errors = {k: e for k, e in outputs(tmp_path / backend, "error").items() if e}
        assert not errors, errors
        reported[backend] = outputs(tmp_path / backend, "prompt_tokens")
    assert len(reported["vllm"]) == 6 and reported["vllm"] == reported["hf"]

    workload = plan(RunConfig(model=family.tiny_model, selection=Selection(suite="demo", max_samples=1),
                              cache_dir=cache))
    assert {k: workload.prompt_tokens[k] for k in reported["vllm"]} == reported["vllm"]

    model = models.resolve(family.tiny_model)
    checked = 0
    with FrameCache(cache, workers=1) as frames:
        for bench in resolve_benchmarks("demo", None):
            spec = bench.frame_spec(model)
            for sample in bench.load_samples(None)[:1]:
                video = frames.get_or_decode(bench.video_path(sample, None), spec, sample.window)
                first, last = video.meta.window_frames or (0, video.meta.source_total_frames - 1)
                n = len(video.frames)
                assert list(video.meta.frames_indices) == REFERENCE_INDICES[family.name](first, last, n)
                assert n % family.frames.temporal == 0
                if family.frames.resize == "fixed":
                    assert video.frames.shape[1:3] == (spec.side, spec.side)
                checked += 1
    assert checked == 6
