"""The summary's streamed aggregation (results/streamed.py: the file read once per reading, each line cut as it is
read) against the held one (`summaries.judged_aggregate`, every line in memory, as the leaderboard reads a run): the
same summary block, byte for byte, and the same completeness, for every benchmark's golden fixture made into a result
file with what real ones hold: several questions per video and some without one, retried samples (the last line
wins), failures that settle their sample and failures that do not, lines of samples since removed, lines that are not
results, outputs the two readings score differently, empty answers, and an active LLM judge's verdicts (judged,
undecided, and one about an output that has changed since).

The lines are written by the pipeline's own line builder and scored by the real benchmark-aware scorer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_benchmarks_golden import FIXTURES, _per_source, build_data_root, load_fixture

from vbench_async.backends.base import Completion, SamplingParams
from vbench_async.benchmarks import get_benchmark, score_sample
from vbench_async.errors import SampleError
from vbench_async.evaluation.pipeline import Pipeline, WorkItem
from vbench_async.results.result_file import ResultStore, read_results
from vbench_async.results.streamed import streamed_aggregate
from vbench_async.results.summaries import judged_aggregate
from vbench_async.results.verdicts import JudgeIdentity, activate_judge, answer_hash, judge_store
from vbench_async.sample_result import Result, is_final
from vbench_async.samples import Sample
from vbench_async.scoring.judges import judge_for

COPIES = 4  # each fixture question asked this many times, on shared videos and (the last copy) without one
HASH = "0123456789ab"


def _samples(name: str, data: Path) -> tuple[str, list[Sample], list[str]]:
    """The fixture's samples (its unified source, else its hub one) in COPIES variants, and the outputs to score."""
    fx = load_fixture(name)
    source = "unified" if "unified" in fx else "hub"
    bench = get_benchmark(fx["benchmark"])
    items = [s for s in bench.load_samples(build_data_root(fx, source, data)) if isinstance(s, Sample)]
    outputs = [*_per_source(fx["predictions"], source), "", "Based on the video: A", "<answer>B</answer>"]
    samples = [replace(s, sample_id=f"{s.sample_id}~{c}", video=None if c == COPIES - 1 else s.video)
               for c in range(COPIES) for s in items]
    return bench.id, samples, outputs


def _line(builder: Pipeline, sample: Sample, output: str, error: SampleError | None = None) -> Result:
    item = WorkItem(sample=sample, prompt="p", store=ResultStore(Path("/nonexistent"), sample.benchmark, HASH))
    completion = None if error else Completion(text=output, prompt_tokens=3, output_tokens=2, finish_reason="stop",
                                               latency_s=0.25)
    return builder._result(item, "p", completion, error)


def _result_file(run_dir: Path, samples: list[Sample], outputs: list[str]) -> Path:
    builder = Pipeline(backend=None, load_video=None, load_image=None, score=score_sample, sampling=SamplingParams())
    lines = []
    for i, s in enumerate(samples):
        error = SampleError("video_missing", "gone") if i % 11 == 5 else \
            SampleError("decode_timeout", "slow") if i % 13 == 7 or i % 5 == 0 else None  # settles it / does not
        lines.append(_line(builder, s, outputs[i % len(outputs)], error))
    for i in range(0, len(samples), 5):  # retried after a failure: the newer line is the one that counts
        lines.append(_line(builder, samples[i], outputs[(i + 1) % len(outputs)]))
    store = ResultStore(run_dir, samples[0].benchmark, HASH)
    with store:
        for r in lines:
            store.append(r)
    with store.path.open("a") as fh:  # lines no reader may count
        fh.write("not json\n")
        fh.write(json.dumps({**lines[0].to_dict(), "config_hash": "ffffffffffff"}) + "\n")
    return store.path


def _judge(run_dir: Path, path: Path) -> None:
    """An active judge with a verdict on most lines awaiting one: correct, incorrect, undecided, and one about an
    output that has changed since (no longer current)."""
    identity = JudgeIdentity(model="judge", fingerprint="f" * 64, backend="openai", sampling={}, prompt_hash="p" * 16)
    activate_judge(run_dir, identity)
    waiting = [r for r in read_results(path).values() if r.needs_judge()]
    with judge_store(run_dir, path, identity.key) as store:
        for i, r in enumerate(waiting):
            if i % 5 == 4:
                continue  # never judged
            score = None if i % 5 == 3 else float(i % 2)
            store.append({"sample_id": r.sample_id, "judge_id": "judge@f", "prompt_hash": judge_for(r).prompt_hash,
                          "answer_hash": "0" * 16 if i % 5 == 2 else answer_hash(r), "output": "VERDICT: ?",
                          "verdict": None if score is None else ("correct" if score else "incorrect"), "score": score,
                          "error": {"kind": "judge_unparsable", "message": "?"} if score is None else None,
                          "protocol": "generic"})


@pytest.mark.parametrize("judged", [False, True], ids=["no-judge", "judge"])
@pytest.mark.parametrize("name", FIXTURES)
def test_streamed_summary_equals_the_held_one(name: str, judged: bool, tmp_path: Path) -> None:
    bid, samples, outputs = _samples(name, tmp_path / "data")
    run_dir = tmp_path / "run"
    path = _result_file(run_dir, samples, outputs)
    if judged:
        _judge(run_dir, path)
    bench = get_benchmark(bid)
    current = {s.sample_id for s in samples[2:]}  # two questions since removed from the annotation file

    held = judged_aggregate(run_dir, bench, path, current_ids=current)
    streamed = streamed_aggregate(run_dir, bench, path, current_ids=current)
    assert json.dumps(streamed.block) == json.dumps(held.summary_block())
    assert streamed.n_final == sum(1 for r in held.results if is_final(r))
    assert held.summary_block()["n_stale"] == 2 and held.summary_block()["n_bad_lines"] == 2  # the file is mixed
    assert ("judge" in streamed.block) == (judged and any(r.needs_judge() for r in held.results))

    # A stored run recomputed (a judge pass): the stale ids come from its summary block.
    block = held.summary_block()
    again = streamed_aggregate(run_dir, bench, path, block=block)
    assert json.dumps(again.block) == json.dumps(judged_aggregate(run_dir, bench, path, block=block).summary_block())
