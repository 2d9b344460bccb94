"""Both readings in the summary, the table and the leaderboard's data: the headline from the official reading, the
robust score and the disagreeing samples beside it; a subset run is never "complete".

Result directories are written by the real pipeline's line builder, the real benchmark-aware scorer
(`benchmarks.score_sample`: each card's official protocol and the careful grader), the real result store and the real
summary writer.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path

import pytest

from vbench_async.backends.base import Completion, SamplingParams
from vbench_async.benchmarks import get_benchmark, score_sample
from vbench_async.benchmarks.prompts import PromptSettings
from vbench_async.benchmarks.selection import Selection
from vbench_async.cli.output import print_table
from vbench_async.evaluation.pipeline import Pipeline, WorkItem
from vbench_async.evaluation.run_config import recorded
from vbench_async.evaluation.runner import BenchmarkPlan, RunConfig, result_config
from vbench_async.models import ModelRef
from vbench_async.results.manifest import plain
from vbench_async.results.readings import aggregate_readings, differing_ids, reading_lines
from vbench_async.results.result_file import ResultStore, config_hash
from vbench_async.results.summaries import recompute_summary, write_run_outputs
from vbench_async.samples import Sample, parse_record

MC = {"problem": "q", "problem_type": "multiple choice", "options": ["A. x", "B. y"], "solution": "<answer>B</answer>"}
# LongVideoBench's official parser takes the first capital A-E anywhere ("Based" reads B) and guesses at random
# when it finds none; the careful grader reads the final answer.
OUTPUTS = ["B", "Based on the video: A", "no idea", "B", "A"]


def _samples(bid: str, records: list[dict]) -> list[Sample]:
    return [parse_record({**rec, "problem_id": i, "path": f"v{i}.mp4"}, bid, i) for i, rec in enumerate(records)]


def _lines(samples: list[Sample], outputs: list[str], store: ResultStore | None = None) -> list[dict]:
    builder = Pipeline(backend=None, load_video=None, load_image=None, score=score_sample, sampling=SamplingParams())
    store = store or ResultStore(Path("/nonexistent"), samples[0].benchmark, "x")
    out = []
    for s, text in zip(samples, outputs):
        item = WorkItem(sample=s, prompt="p", store=store)
        out.append(builder._result(item, "p", Completion(text=text, prompt_tokens=1, output_tokens=1,
                                                         finish_reason="stop", latency_s=0.1), None).to_dict())
    return out


def _run(run_dir: Path, bid: str, samples: list[Sample], outputs: list[str], max_samples: int | None = None,
         shard: tuple[int, int] | None = None, variant: str = "official") -> dict:
    """A run directory as `vbench-async run` writes it (shard: that shard's own summary)."""
    model = ModelRef(name="m", path="/models/m", family="qwen2.5-vl", fingerprint=hashlib.sha256(b"m").hexdigest())
    cfg = RunConfig(model="m", output_dir=run_dir, selection=Selection(max_samples=max_samples), shard=shard,
                    prompt=PromptSettings(variant))
    bench = get_benchmark(bid)
    bench.prompt_variant = variant  # as runner._load sets it
    spec = bench.frame_spec(model)
    config = result_config(bench, model, cfg, spec, None)  # as the runner records it
    store = ResultStore(run_dir, bid, config_hash(config.to_json()), shard=shard)
    with store:
        for line in _lines(samples, outputs, store):
            store.append(line)
    plan = BenchmarkPlan(bench, store, spec, config, n_total=len(samples), entries=[])
    return write_run_outputs(run_dir, model, plain(recorded(cfg)), {}, [plan], {"backend": {"backend": "vllm"}},
                             time.time() - 1, shard=shard).to_json()


def test_headline_is_the_official_reading_with_the_robust_score_and_disagreements_beside_it():
    lines = _lines(_samples("longvideobench", [MC] * 5), OUTPUTS)
    guessed = lines[2]["official"]["value"]  # the seeded random guess of "no idea"
    agg = aggregate_readings(get_benchmark("longvideobench"), lines).block()
    assert agg["reading"] == "official"
    assert agg["score"] == pytest.approx((1 + 1 + guessed + 1 + 0) / 5)
    assert agg["robust"]["score"] == pytest.approx(2 / 5)
    assert agg["n_official_guessed"] == 1
    expected = ["1"] + (["2"] if guessed else [])
    assert differing_ids(lines) == expected and agg["n_readings_differ"] == len(expected)
    assert agg["interval"]["low"] <= agg["score"] <= agg["interval"]["high"]


def test_official_judge_wait_empties_the_official_headline_only():
    """TempCompass: a multiple-choice answer the official rules cannot match goes to its ChatGPT judge; the careful
    grader reads it. The headline says "needs judge"; the robust score stands."""
    rec = {"problem": "Which is it?\nA. left\nB. right", "problem_type": "multiple choice",
           "options": ["A. left", "B. right"], "solution": "<answer>A</answer>", "task_format": "multi-choice"}
    lines = _lines(_samples("tempcompass", [rec, rec]), ["A", "left"])
    official = lines[1]["official"]
    assert official["value"] is None and official["needs_judge"]  # the premise: the official rules hand it on
    agg = aggregate_readings(get_benchmark("tempcompass"), lines).block()
    assert agg["score"] is None and agg["headline_status"] == "needs judge"
    assert agg["robust"]["score"] == pytest.approx(1.0) and "headline_status" not in agg["robust"]
    # a verdict of the judge counts for the reading that waited for it
    judged = [lines[0], {**lines[1], "score": 0.0, "details": {**lines[1]["details"], "judge": {"verdict": "no"}}}]
    assert [r.score for r in reading_lines(judged, "official")] == [1.0, 0.0]


def test_without_official_code_the_headline_is_the_robust_reading():
    lines = _lines(_samples("odvbench", [{**MC, "solution": "<answer>A</answer>"}] * 2), ["A", "B"])
    agg = aggregate_readings(get_benchmark("odvbench"), lines).block()
    assert agg["reading"] == "robust" and agg["score"] == pytest.approx(0.5) == agg["robust"]["score"]
    assert agg["n_readings_differ"] == 0


def test_stvg_predecessor_number_stays_the_scorers_value():
    truth = '<answer>{"time": [1.0, 3.0], "boxes": {"1": [0, 0, 10, 10], "2": [0, 0, 10, 10]}}</answer>'
    rec = {"problem": "the dog", "problem_type": "spatial-temporal grounding", "solution": truth}
    out = '<answer>{"time": [1.0, 3.0], "boxes": {"1": [0, 0, 10, 10]}}</answer>'
    lines = _lines(_samples("stvg", [rec]), [out])
    agg = aggregate_readings(get_benchmark("stvg"), lines).block()
    assert agg["predecessor_combined"]["score"] == pytest.approx(lines[0]["score"])  # 0.5 tIoU + 0.5 box IoU
    assert agg["score"] == pytest.approx(lines[0]["official"]["value"]) == pytest.approx(0.5)  # vIoU 1/2


def test_summary_and_recompute_keep_both_readings(tmp_path):
    run = tmp_path / "run"
    summary = _run(run, "longvideobench", _samples("longvideobench", [MC] * 5), OUTPUTS)
    block = summary["benchmarks"]["longvideobench"]
    assert block["status"] == "complete" and summary["status"] == "complete"
    assert block["robust"]["score"] == pytest.approx(0.4) and block["n_readings_differ"] >= 1
    again = recompute_summary(run).to_json()["benchmarks"]["longvideobench"]
    for key in ("score", "robust", "n_readings_differ", "n_official_guessed", "reading", "interval"):
        assert again[key] == block[key], key
    assert json.loads((run / "summary.json").read_text())["benchmarks"]["longvideobench"]["robust"] == block["robust"]


def test_the_table_names_the_reading_the_summary_records(tmp_path):
    official = _run(tmp_path / "lvb", "longvideobench", _samples("longvideobench", [MC] * 5), OUTPUTS)
    samples = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:3]
    robust = _run(tmp_path / "demo", "demo-mc", samples, [s.answer for s in samples])
    assert official["benchmarks"]["longvideobench"]["reading"] == "official"
    assert robust["benchmarks"]["demo-mc"]["reading"] == "robust"  # no official code for the demo cards

    def note(summary: dict) -> str:
        buf = io.StringIO()
        print_table(summary, file=buf)
        return next(line.strip() for line in buf.getvalue().splitlines() if line.strip().startswith("score:"))

    assert note(official).startswith("score: the official protocol's reading (comparable with papers); robust:")
    assert note(robust).startswith("score: the careful grader's reading (summary.json's \"reading\": \"robust\"")
    assert "official protocol" not in note(robust)
    both = {**official, "benchmarks": {**official["benchmarks"], **robust["benchmarks"]}}
    assert "except demo-mc: no official scoring code, so the careful grader's (\"reading\": \"robust\")" in note(both)


def test_max_samples_run_is_a_subset_everywhere(tmp_path):
    bench = get_benchmark("demo-mc")
    samples = [s for s in bench.load_samples(None) if isinstance(s, Sample)][:3]
    summary = _run(tmp_path / "run", "demo-mc", samples, [s.answer for s in samples], max_samples=3)
    block = summary["benchmarks"]["demo-mc"]
    assert block["complete"] and block["status"] == "subset" and summary["status"] == "subset"
    assert block["subset"]["max_samples"] == 3 and block["subset"]["n_available"] == bench.record_count(None)
    assert recompute_summary(tmp_path / "run").benchmarks["demo-mc"].status == "subset"
    buf = io.StringIO()
    print_table(summary, file=buf)
    text = buf.getvalue()
    assert "SUBSET" in text and "complete" not in text.split("\n")[2] and "--max-samples 3" in text

    from vbench_async.leaderboard import load_runs
    from vbench_async.leaderboard.tables import main_table

    row = main_table(load_runs([tmp_path / "run"])).iloc[0]
    assert row["status"] == "subset" and not row["complete"] and "subset" in row["markers"]


def test_a_run_with_failed_samples_is_partial_with_every_sample_in_the_denominator(tmp_path):
    from test_leaderboard_runs import make_run

    from vbench_async.errors import SampleError

    def three_of_four_fail(sample, i):
        return sample.answer if i == 0 else SampleError("video_missing", f"{sample.video} not found")

    mc = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:4]
    run = make_run(tmp_path / "run", "model-x", three_of_four_fail, benchmarks=("demo-mc",), samples={"demo-mc": mc})
    summary = json.loads((run / "summary.json").read_text())
    block = summary["benchmarks"]["demo-mc"]
    assert block["status"] == "partial" and summary["status"] == "partial"  # never "complete" with 3 of 4 failed
    assert block["complete"]  # every sample has its final line: a re-run has nothing left to do
    assert (block["n_total"], block["n_failed"], block["score"]) == (4, 3, pytest.approx(0.25))  # failures count
    buf = io.StringIO()
    print_table(summary, file=buf)
    row = buf.getvalue().splitlines()[2].split()
    assert row[0] == "demo-mc" and row[-3:] == ["4", "3", "PARTIAL"], buf.getvalue()
    assert recompute_summary(run).status == "partial"

    from vbench_async.leaderboard import load_runs
    from vbench_async.leaderboard.tables import main_table

    assert main_table(load_runs([run])).iloc[0]["status"] == "partial"


def test_max_samples_above_the_record_count_is_the_whole_benchmark(tmp_path):
    samples = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)]
    summary = _run(tmp_path / "run", "demo-mc", samples, [s.answer for s in samples], max_samples=1000)
    assert summary["benchmarks"]["demo-mc"]["status"] == "complete" and "subset" not in summary["benchmarks"]["demo-mc"]


def test_a_shard_summary_is_a_subset(tmp_path):
    samples = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:2]
    summary = _run(tmp_path / "run", "demo-mc", samples, [s.answer for s in samples], shard=(0, 2))
    assert summary["benchmarks"]["demo-mc"]["status"] == "subset"
    assert summary["benchmarks"]["demo-mc"]["subset"]["shard"] == "0/2"


def test_table_names_the_metric_and_shows_interval_and_robust_score(tmp_path):
    summary = _run(tmp_path / "run", "longvideobench", _samples("longvideobench", [MC] * 5), OUTPUTS)
    buf = io.StringIO()
    print_table(summary, file=buf)
    header, _, row = buf.getvalue().splitlines()[:3]
    assert header.split() == ["benchmark", "metric", "score", "95%", "CI", "chance", "robust", "differ", "n_total",
                              "failed", "status"]
    block = summary["benchmarks"]["longvideobench"]
    ci = block["interval"]
    assert row.split()[:2] == ["longvideobench", "accuracy"]
    assert f"[{100 * ci['low']:.2f}, {100 * ci['high']:.2f}]" in row and "40.00" in row
    assert row.split()[-4] == str(block["n_readings_differ"])


def test_leaderboard_data_has_both_readings_and_the_differing_samples(tmp_path):
    from vbench_async.leaderboard import load_runs
    from vbench_async.leaderboard.tables import main_table, samples_table

    _run(tmp_path / "run", "longvideobench", _samples("longvideobench", [MC] * 5), OUTPUTS)
    runs = load_runs([tmp_path / "run"])
    cell = runs[0].benchmarks["longvideobench"]
    assert "1" in cell.differing_ids and cell.robust_score == pytest.approx(0.4)
    row = main_table(runs).iloc[0]
    assert row["score"] == pytest.approx(cell.score) and row["robust_score"] == pytest.approx(0.4)
    assert row["n_readings_differ"] == len(cell.differing_ids) and row["reading"] == "official"
    assert row["ci_low"] <= row["score"] <= row["ci_high"]
    samples = samples_table(runs, "longvideobench").set_index("sample_id")
    assert samples.loc["1", "readings_differ"] and samples.loc["1", "official_score"] == 1.0
    assert samples.loc["1", "robust_score"] == 0.0 and not samples.loc["0", "readings_differ"]


def test_site_data_says_which_aggregation_was_reported_instead(tmp_path):
    """MVBench's unified file has no task field: the 20-task mean cannot be computed, and the row says what was
    reported instead and why."""
    from vbench_async.leaderboard import load_runs
    from vbench_async.leaderboard.tables import main_table

    rec = {**MC, "options": ["A. x", "B. y"], "solution": "<answer>B</answer>"}
    summary = _run(tmp_path / "run", "mvbench", _samples("mvbench", [rec] * 2), ["B", "A"])
    basis = summary["benchmarks"]["mvbench"]["headline_basis"]
    assert basis["reported"] == "mean over all samples" and basis["reason"]
    row = main_table(load_runs([tmp_path / "run"])).iloc[0]
    assert basis["reason"] in row["headline_reported_instead"]
    buf = io.StringIO()
    print_table(summary, file=buf)
    assert "mvbench: mean over all samples reported instead of" in buf.getvalue()


def test_manifest_records_the_prompt_variant(tmp_path):
    samples = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:1]
    _run(tmp_path / "run", "demo-mc", samples, ["A"], variant="predecessor")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    entry = manifest["benchmarks"]["demo-mc"]
    assert manifest["prompt_variant"] == "predecessor" == entry["prompt_variant"]
    assert entry["prompt_templates"]["variant"] == "predecessor"
    assert entry["prompt_template_hash"] == entry["prompt_templates"]["hash"] != \
        get_benchmark("demo-mc").prompt_template_hash()  # the official variant's hash (part of the config hash)


def test_a_run_sets_each_benchmarks_prompt_variant():
    from vbench_async.evaluation.runner import _load

    cfg = RunConfig(model="m", selection=Selection(benchmarks=("demo-mc",)), prompt=PromptSettings("predecessor"))
    (bench, _), = _load(cfg)[0]
    assert bench.prompt_variant == "predecessor"


def test_table_names_official_breakdowns_the_records_cannot_give(tmp_path):
    summary = _run(tmp_path / "run", "videommmu", _samples("videommmu", [MC]), ["B"])
    buf = io.StringIO()
    print_table(summary, file=buf)
    assert "videommmu: no per-track breakdown: no record has a track" in buf.getvalue()
