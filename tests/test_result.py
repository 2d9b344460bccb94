"""The result line: every line the pipeline writes matches the one JSON Schema read off `Result`, and reads back as
the record it was."""

from __future__ import annotations

import json

import jsonschema
from test_leaderboard_runs import every_third_wrong, make_run

from vbench_async.results.verdict_record import Verdict
from vbench_async.results.verdicts import JUDGED, answer_hash, judge_line
from vbench_async.sample_result import COMPLETION_FIELDS, AppliedVerdict, Result, result_schema
from vbench_async.scoring.base import Reading
from vbench_async.scoring.judges import judge_for


def test_every_written_line_matches_the_schema_and_reads_back(tmp_path):
    run = make_run(tmp_path / "run", "model-r", every_third_wrong, benchmarks=("demo-mc", "demo-yesno", "demo-stvg"))
    schema = result_schema()
    lines = [json.loads(line) for f in sorted((run / "results").glob("*.jsonl")) for line in f.read_text().splitlines()]
    failed = [r for r in lines if r["error"]]
    assert lines and failed and len(failed) < len(lines)  # answered lines and a failure, both checked
    for line in lines:
        jsonschema.validate(line, schema)
        assert Result.from_dict(line).to_dict() == line
    # A failure before any completion has no completion fields; an answered line has all of them.
    assert all(not set(COMPLETION_FIELDS) & set(r) for r in failed)
    assert all(set(COMPLETION_FIELDS) <= set(r) for r in lines if not r["error"])


def test_the_schema_refuses_a_line_of_another_shape():
    line = Result(sample_id="s", benchmark="b", config_hash="h", task_type="multiple choice", question="q",
                  options=["A. x"], answer="A", video=None, fields={}, prompt="p").to_dict()
    jsonschema.validate(line, result_schema())
    for broken in ({**line, "score": "1.0"}, {k: v for k, v in line.items() if k != "sample_id"},
                   {**line, "options": "A. x"}):
        try:
            jsonschema.validate(broken, result_schema())
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"accepted {broken}")


def test_resumed_ids_are_read_without_holding_the_lines(tmp_path):
    """A resumed run learns which samples are done from the result file holding one flag per line, not the lines:
    2,000 lines of 10 kB each (a 20 MB file) are read with a few MB at most. Before, every line was kept until the
    set of ids was made."""
    import tracemalloc

    from vbench_async.results.result_file import ResultStore

    store = ResultStore(tmp_path, "mmvu", "cfg")
    with store:
        lines = []
        for i in range(2000):
            line = Result(sample_id=f"q{i}", benchmark="mmvu", config_hash="cfg", task_type="multiple choice",
                          question="?", options=["A. x", "B. y"], answer="A", video="v.mp4", fields={}, prompt="",
                          output="x" * 10_000,
                          score=1.0)
            if i % 4 == 0:
                line.score, line.error = None, {"kind": "decode_timeout", "message": "transient: tried again"}
            lines.append(store.encode(line))
        store.write_lines(lines)  # one fsync, as the writer thread batches them
    tracemalloc.start()
    done = store.completed_ids()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(done) == 1500 and "q0" not in done and "q1" in done
    assert store.completed_ids(retry_failed=True) == done
    assert peak < 2_000_000, f"{peak / 1e6:.1f} MB held while reading a {store.path.stat().st_size / 1e6:.0f} MB file"


def _stored(sample_id: str, official: dict | None, robust: dict | None, score: float | None = 1.0,
            details: dict | None = None) -> str:
    """A line as the pipeline wrote it (Result's field order, `ResultStore`'s json.dumps)."""
    return json.dumps({"sample_id": sample_id, "benchmark": "mvbench", "config_hash": "h",
                       "task_type": "multiple choice", "question": "Which?", "options": ["A. x", "B. y"],
                       "answer": "A", "video": "v.mp4", "fields": {"task": "t"}, "prompt": "p", "output": "A",
                       "extracted": "A", "score": score, "well_formed": True,
                       "details": details or {"source": "bare_letter"}, "official": official,
                       "robust": robust, "error": None, "frames": None, "prompt_tokens": 12, "output_tokens": 1,
                       "finish_reason": "stop", "latency_s": 0.25}, ensure_ascii=False)


def test_a_stored_line_reads_as_typed_readings_and_writes_back_byte_for_byte():
    robust = {"value": 1.0, "extracted": "A", "guessed": False, "needs_judge": False}
    lines = {
        "plain": _stored("plain", {"value": 1, "extracted": "A", "guessed": True, "needs_judge": False}, robust),
        "dropped": _stored("dropped", {"value": 0.0, "extracted": None, "guessed": False, "needs_judge": False,
                                       "dropped": True}, robust, score=0.0),
        "waits": _stored("waits", {"value": None, "extracted": "A", "guessed": False, "needs_judge": True}, robust),
        "judged": _stored("judged", {"value": 0.0, "extracted": "A", "guessed": False, "needs_judge": False,
                                     "judged": True}, robust, score=0.0,
                          details={"source": "bare_letter", "judge": {"verdict": "incorrect", "judge_id": "j@1",
                                                                      "prompt_hash": "ph", "protocol": "vcrbench",
                                                                      "offline_score": 1.0}}),
        "older": _stored("older", None, None),
    }
    read = {k: Result.read(json.loads(text)) for k, text in lines.items()}
    for k, text in lines.items():
        assert json.dumps(read[k].to_dict(), ensure_ascii=False) == text, k
        for name in ("official", "robust"):
            stored, typed = json.loads(text)[name], read[k].reading(name)
            assert (typed is None) if stored is None else typed.to_dict() == stored, (k, name)
    assert read["plain"].reading("official") == Reading(1, "A", guessed=True)
    assert read["dropped"].reading("official") == Reading(0.0, None, dropped=True)
    assert read["waits"].reading("official") == Reading(None, "A", needs_judge=True) and read["waits"].needs_judge()
    assert read["judged"].reading("official") == Reading(0.0, "A", judged=True) and read["judged"].judged
    assert read["judged"].judge_verdict() == AppliedVerdict("incorrect", "j@1", "ph", "vcrbench", 1.0)
    assert read["older"].reading("official") is None and read["older"].judge_verdict() is None
    # A reading a hand-made line cuts short: the keys it lacks take their defaults.
    assert Reading.from_dict({"value": 0.5}) == Reading(0.5)


def test_a_verdict_writes_the_line_the_dict_merge_wrote():
    """`judge_line` builds the judged reading and the verdict block from the typed records: the same keys, values
    and order as the stored dicts merged by hand, so judged lines keep their bytes."""
    line = Result.read(json.loads(_stored("waits", {"value": None, "extracted": "A", "guessed": False,
                                                    "needs_judge": True, "dropped": True}, None, score=0.4)))
    ph = judge_for(line).prompt_hash
    verdict = Verdict(sample_id="waits", judge_id="j@1", protocol="vcrbench", prompt_hash=ph,
                      answer_hash=answer_hash(line), verdict="correct", score=1.0)
    judged, what = judge_line(line, {"waits": verdict})
    assert what == JUDGED and judged.score == 1.0
    assert json.dumps(judged.official) == json.dumps({**line.official, "value": 1.0, "needs_judge": False,
                                                      "judged": True})
    assert json.dumps(judged.details["judge"]) == json.dumps({"verdict": "correct", "judge_id": "j@1",
                                                              "prompt_hash": ph, "protocol": "vcrbench",
                                                              "offline_score": 0.4})
