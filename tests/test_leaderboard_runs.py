"""Result directories for the leaderboard tests, written by the real result store, the real result-line builder of the
pipeline, the real scorers and the real report writer, from the built-in demo suite's samples.

What a model "said" is chosen per sample (right, wrong, a failure, HTML/script text), so the tests know every number.
The browser test takes real runs instead when VBENCH_LEADERBOARD_RUNS names them (colon-separated run directories,
e.g. the output of `vbench-async run --model tiny-qwen2.5-vl --suite demo`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from vbench_async.backends.base import Completion
from vbench_async.backends.sampling_overrides import SamplingOverrides
from vbench_async.benchmarks import get_benchmark
from vbench_async.errors import SampleError
from vbench_async.evaluation.pipeline import Pipeline, WorkItem
from vbench_async.evaluation.run_config import recipe_of, recorded, run_sampling
from vbench_async.evaluation.runner import BenchmarkPlan, RunConfig, result_config
from vbench_async.frames.cache import FrameCache
from vbench_async.frames.frame_settings import FrameSettings
from vbench_async.models import ModelRef
from vbench_async.results.manifest import plain
from vbench_async.results.result_file import ResultStore, config_hash
from vbench_async.results.summaries import write_run_outputs
from vbench_async.samples import Sample
from vbench_async.scoring import score

BENCHMARKS = ("demo-mc", "demo-yesno", "demo-count")
XSS = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"><b>bold</b> & <i>more</i>'

# (sample, index) -> model output text, or a SampleError for a failed sample
Answer = Callable[[Sample, int], "str | SampleError"]


def right(sample: Sample, i: int) -> str:
    return f"The answer is {sample.answer}"


def every_third_wrong(sample: Sample, i: int) -> str | SampleError:
    if i == 0 and sample.benchmark == "demo-mc":
        return XSS  # shown as text on the sample page, scored as a malformed answer
    if i == 1 and sample.benchmark == "demo-yesno":
        return SampleError("engine_error", "RuntimeError: <prompt> too long")
    return "I cannot tell." if i % 3 == 0 else right(sample, i)


def make_run(run_dir: Path, model_name: str, answer: Answer, benchmarks=BENCHMARKS, keep: int | None = None,
             frame_overrides: dict | None = None, samples: dict[str, list[Sample]] | None = None,
             cache: FrameCache | None = None, family: str = "qwen2.5-vl", model_path: Path | None = None,
             recipe: str | None = None) -> Path:
    """Write a result directory as `vbench-async run` does. `keep`: only the first N samples (a partial run);
    `samples`: the samples of a benchmark, instead of its own (for cards whose data is not at hand); `cache`: a real
    frame cache the samples' videos are decoded into, so each line records the frames a model would have received;
    `model_path`: a model folder on this machine (the manifest records what the writer reads there); `recipe`: an
    evaluation recipe's name (`run --recipe`), whose prompts, frames and sampling the lines and config then follow."""
    model = ModelRef(name=model_name, path=str(model_path or f"/models/{model_name}"), family=family,
                     fingerprint=hashlib.sha256(model_name.encode()).hexdigest()[:24])
    cfg = RunConfig(model=model_name, output_dir=run_dir, sampling=SamplingOverrides(seed=7),
                    frame_overrides=FrameSettings(**(frame_overrides or {})),
                    cache_dir=cache.root if cache is not None else None, recipe=recipe)
    builder = Pipeline(backend=None, load_video=None, load_image=None, score=score, sampling=run_sampling(cfg))
    plans = []
    for bid in benchmarks:
        bench = get_benchmark(bid)
        bench.use_recipe(recipe_of(cfg), cfg.prompt.prompt_variant)
        spec = bench.frame_spec(model, cfg.frame_overrides)
        todo = (samples or {}).get(bid) or [s for s in bench.load_samples(None) if isinstance(s, Sample)]
        config = result_config(bench, model, cfg, spec, None)  # as the runner records it
        store = ResultStore(run_dir, bench.id, config_hash(config.to_json()))
        with store:
            for i, s in enumerate(todo[:keep] if keep is not None else todo):
                out = answer(s, i)
                prompt = bench.render_prompt(s)
                item = WorkItem(sample=s, prompt=prompt, store=store)
                seen = None
                if cache is not None and s.video:
                    video = bench.video_path(s, None)
                    seen = cache.get_or_decode(video, spec, s.window).seen(video).to_dict()
                if isinstance(out, SampleError):
                    line = builder._result(item, prompt, None, out, seen)
                else:
                    line = builder._result(item, prompt, Completion(text=out, prompt_tokens=100, output_tokens=9,
                                                            finish_reason="stop", latency_s=0.1), None, seen)
                store.append(line)
        plans.append(BenchmarkPlan(bench, store, spec, config, n_total=len(todo), entries=[]))
    write_run_outputs(run_dir, model, plain(recorded(cfg)), {}, plans, {"backend": {"backend": "vllm"}},
                      time.time() - 5)
    return run_dir


def make_runs(root: Path) -> list[Path]:
    """Three runs: a perfect one, one with wrong answers, a failure and hostile text, and a partial one."""
    return [
        make_run(root / "perfect", "model-perfect", right),
        make_run(root / "noisy", "model-noisy", every_third_wrong),
        make_run(root / "partial", "model-partial", right, keep=4),
    ]


def windowed(samples: list[Sample], start: float = 1.0, end: float = 3.0) -> list[Sample]:
    """The samples with a clip window on the first one (the demo suite has none)."""
    import dataclasses

    return [dataclasses.replace(samples[0], window=(start, end)), *samples[1:]]


def make_frame_runs(root: Path, cache: FrameCache, keep: int = 4) -> list[Path]:
    """Runs of demo-mc whose lines record real frames from `cache`: a right one, one with wrong answers (flipped
    samples), and the same model at a smaller frame budget (a frame sweep). The first sample has a clip window."""
    mc = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:keep]
    samples = {"demo-mc": windowed(mc)}
    common: dict[str, Any] = dict(benchmarks=("demo-mc",), samples=samples, cache=cache)
    return [make_run(root / "frames-a", "model-a", right, **common),
            make_run(root / "frames-b", "model-b", every_third_wrong, **common),
            make_run(root / "frames-b8", "model-b", every_third_wrong, frame_overrides={"max_frames": 8}, **common)]


def runs_under_test(root: Path) -> list[Path]:
    """The runs named by VBENCH_LEADERBOARD_RUNS (colon-separated run directories, e.g. tiny-model runs of
    `vbench-async run`), else the three runs of `make_runs`."""
    env = os.environ.get("VBENCH_LEADERBOARD_RUNS")
    if env:
        return [Path(p) for p in env.split(":") if p]
    return make_runs(root)


def with_hostile_output(src: Path, dst: Path) -> tuple[Path, str, str]:
    """A copy of run `src` in which the first sample of its first benchmark was re-run and answered with HTML and
    script text (appended as the sample's newer line, as a retried sample is). Returns (run, benchmark, sample id)."""
    shutil.copytree(src, dst)
    for stale in ("leaderboard", "judge"):
        shutil.rmtree(dst / stale, ignore_errors=True)
    summary = json.loads((dst / "summary.json").read_text())
    bid, block = next(iter(summary["benchmarks"].items()))
    path = dst / block["results_file"]
    first = json.loads(path.read_text().splitlines()[0])
    first.update(output=XSS, extracted=None, score=0.0, well_formed=False, error=None)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(first) + "\n")
    return dst, bid, first["sample_id"]


def test_runs_hold_real_scored_results(tmp_path):
    perfect, noisy, partial = make_runs(tmp_path)
    s = json.loads((perfect / "summary.json").read_text())
    assert s["complete"] and all(b["score"] == 1.0 for b in s["benchmarks"].values())
    n = json.loads((noisy / "summary.json").read_text())["benchmarks"]
    assert n["demo-yesno"]["n_failed"] == 1 and n["demo-mc"]["score"] < 1.0
    p = json.loads((partial / "summary.json").read_text())
    assert not p["complete"] and p["benchmarks"]["demo-mc"]["n_total"] == 4


def test_manifest_says_how_the_numbers_were_made(tmp_path):
    run = make_run(tmp_path / "m", "model-m", every_third_wrong, benchmarks=("demo-mc", "demo-yesno"))
    m = json.loads((run / "manifest.json").read_text())
    assert m["model"]["path"] == "/models/model-m" and len(m["model"]["fingerprint"]) == 24
    assert m["backend"]["name"] == "vllm" and m["sampling"]["seed"] == 7 and m["seed"] == 7
    mc = m["benchmarks"]["demo-mc"]
    assert mc["frames"]["max_frames"] == 32 and mc["frames"]["family"] == "qwen2.5-vl"
    assert mc["prompt_templates"]["hash"] == mc["prompt_template_hash"]
    assert mc["prompt_template_hash"] == get_benchmark("demo-mc").prompt_template_hash()
    assert mc["prompt_templates"]["files"] and all(len(h) == 16 for h in mc["prompt_templates"]["files"].values())
    assert mc["results_file"].startswith("results/demo-mc.") and mc["aggregation"]["kind"] == "micro"
    assert m["benchmarks"]["demo-yesno"]["counts"]["n_failed"] == 1
    assert m["counts"] == {"n_expected": 22, "n_total": 22, "n_scored": 21, "n_failed": 1, "n_pending": 0,
                           "complete": True}
    assert m["versions"]["python"] and "pandas" in m["versions"] and "jinja2" in m["versions"]
    assert m["git_commit"] is None or len(m["git_commit"].split("+")[0]) == 40
    assert m["hardware"]["cpus"] >= 1 and m["hardware"]["machine"]
    assert m["started_at"] < m["finished_at"] and m["duration_s"] > 0
    assert m["judge"] is None and m["run_config"]["output_dir"] == str(run)


def test_model_revision_from_a_hub_cache_snapshot(tmp_path):
    from vbench_async.results.manifest import model_identity

    snap = tmp_path / "models--org--m" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    ident = model_identity(ModelRef(name="org/m", path=str(snap), family="qwen3-vl", fingerprint="f"))
    assert ident["revision"] == "0123abcd" and ident["fingerprint"] == "f"
