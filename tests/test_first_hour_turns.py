"""First-hour wrong turns on a user's own benchmark, through the `vbench-async` entry point in-process: `plan` says
why samples fail early, a failed run's `data check` hint keeps the flags that find the benchmark, a repaired
annotation line replaces its stale `record_invalid` failure, and a resume with nothing left to run starts no engine.

Every sample fails (its video is missing, or its line is broken), so the real runner, result store and summary writer
run in seconds on the transformers backend."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from vbench_async.benchmarks import include
from vbench_async.cli import main
from vbench_async.results.lines import iter_lines

CARD = {"id": "my-clips", "name": "My clips", "sources": {"unified": {"annotation": "my.jsonl", "video_dir": "v"}},
        "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy"}


def _record(i: int) -> str:
    return json.dumps({"problem_id": f"c{i}", "problem": "Which colour fills the frame?", "problem_type": "mcq",
                       "options": ["A. grey", "B. red"], "solution": "<answer>A</answer>", "path": f"c{i}.mp4"})


BROKEN = _record(1)[:40]  # an editor's half-saved line: not JSON


@dataclass
class Said:
    rc: int
    out: str
    err: str


@dataclass
class Story:
    data: Path
    cards: Path
    out: Path
    plan: Said
    first: Said
    repaired: Said
    again: Said

    def results(self) -> list[dict]:
        (path,) = (self.out / "results").glob("my-clips.*.jsonl")
        return [line for _, line in iter_lines(path)]


def _cli(*args: str) -> Said:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return Said(rc, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> Story:
    import yaml

    root = tmp_path_factory.mktemp("turns")
    data, cards = root / "data", root / "cards"
    data.mkdir()
    cards.mkdir()
    (cards / "my-clips.yaml").write_text(yaml.safe_dump(CARD))
    annotation = data / "my.jsonl"
    annotation.write_text("\n".join([_record(0), BROKEN, _record(2)]) + "\n")  # no video is there: c0, c2 fail
    common = ("--include", str(cards), "--benchmarks", "my-clips", "--data-root", str(data), "--model",
              "tiny-qwen2.5-vl", "--cache-dir", str(root / "cache"))
    # transformers, not vLLM: the engine only sees the missing videos fail, and starts in seconds
    run = ("run", *common, "--backend", "hf", "--output-dir", str(root / "out"), "--no-site", "--no-progress")
    saved = list(include._added)
    try:
        plan = _cli("plan", *common)
        first = _cli(*run)
        annotation.write_text("\n".join(_record(i) for i in range(3)) + "\n")  # the line repaired (its video absent)
        repaired = _cli(*run)
        again = _cli(*run)
    finally:
        include._added[:] = saved
    return Story(data, cards, root / "out", plan, first, repaired, again)


def test_plan_says_why_samples_fail_early(story):
    assert story.plan.rc == 0, story.plan.err
    assert "3 (3 fail early)" in story.plan.out  # the table's count, then the why below it
    out = " ".join(story.plan.out.split())
    assert "my-clips: 3 sample(s) fail before the engine: 2 video_missing, 1 record_invalid" in out
    assert "video_missing: c0: video not found" in out and "record_invalid: #1: line 2 is not valid JSON" in out
    assert "fix the annotation records: `vbench-async data validate FILE`" in out  # the next step, as `run` says it


def test_the_data_check_hint_keeps_the_flags_that_find_the_benchmark(story):
    assert story.first.rc == 1
    hint = next(line for line in story.first.err.splitlines() if "check the data:" in line)
    command = shlex.split(hint.split("check the data:", 1)[1])
    assert command == ["vbench-async", "data", "check", "my-clips", "--data-root", str(story.data), "--include",
                       str(story.cards)]
    saved = list(include._added)
    try:
        pasted = _cli(*command[1:])  # as a user pastes it: it finds the benchmark and lists the missing videos
    finally:
        include._added[:] = saved
    assert pasted.rc == 1 and "unknown benchmark" not in pasted.err, pasted.err
    assert "c0.mp4" in pasted.out and "c2.mp4" in pasted.out


def test_a_repaired_line_replaces_its_stale_record_invalid_failure(story):
    assert "1 record_invalid" in story.first.err and "#1" in story.first.err
    lines = story.results()
    assert sorted(r["sample_id"] for r in lines) == ["c0", "c1", "c2"]  # one line per sample, "#1" gone
    assert {r["error"]["kind"] for r in lines} == {"video_missing"}
    assert "record_invalid" not in story.repaired.err and "#1" not in story.repaired.err
    assert "3 sample(s) failed:" in story.repaired.err and "3 video_missing" in story.repaired.err
    summary = json.loads((story.out / "summary.json").read_text())["benchmarks"]["my-clips"]
    assert (summary["n_total"], summary["n_failed"]) == (3, 3) and "stale_ids" not in summary


def test_a_resume_with_nothing_to_run_starts_no_engine(story):
    out = story.again.out
    assert "start: model tiny-qwen2.5-vl: 3 of 3 already done, nothing to run" in out
    assert "starting engine" not in out and story.again.rc == 1  # its samples failed: still exit 1
    assert "starting engine" in story.first.out  # two samples to send (their videos fail only when loaded)


def test_only_a_record_that_was_not_a_sample_counts_as_repaired(tmp_path):
    """A sample whose answer could not be scored fails with record_invalid too: a resume keeps that line (and re-runs
    nothing); a broken record made valid is re-run, and its old line goes only once its new result is written."""
    from vbench_async.evaluation.runner import repaired_records
    from vbench_async.results.result_file import ResultStore
    from vbench_async.sample_result import INVALID_TASK, Result
    from vbench_async.samples import Sample, SampleError

    store = ResultStore(tmp_path, "b", "h")

    def line(sid: str, task: str, kind: str | None) -> Result:
        return Result(sample_id=sid, benchmark="b", config_hash="h", task_type=task, question="", options=[],
                      answer="", video=None, fields={}, prompt="",
                      error={"kind": kind, "message": "m"} if kind else None)

    with store.open():
        store.append(line("s0", "multiple choice", "record_invalid"))  # its answer could not be scored
        store.append(line("#1", INVALID_TASK, "record_invalid"))  # a broken line, valid now (s1)
        store.append(line("s2", INVALID_TASK, "record_invalid"))  # a field was missing; the record has it now
    before = store.path.read_bytes()
    sample = [Sample(benchmark="b", sample_id=f"s{i}", task_type="multiple choice", question="q", answer="A")
              for i in range(3)]
    repaired = repaired_records(store.failure_kinds(), sample, store.invalid_records)
    assert repaired == {"#1": "s1", "s2": "s2"}
    broken = SampleError("record_invalid", "still broken")
    broken.sample_id = "#1"
    assert repaired_records(store.failure_kinds(), [sample[0], broken, sample[2]], store.invalid_records) == {
        "s2": "s2"}
    assert store.drop_failures(set()) == 0 and store.path.read_bytes() == before
    with store.open():
        store.append(line("s2", "multiple choice", "record_invalid"))  # s2's new line (its answer unscorable too)
    assert store.drop_failures({"s2"}) == 1  # the old stub goes, the new line stays
    assert [r["sample_id"] for r in store_lines(store)] == ["s0", "#1", "s2"]
    assert store_lines(store)[-1]["task_type"] == "multiple choice"


def store_lines(store) -> list[dict]:
    return [rec for _, rec in iter_lines(store.path)]
