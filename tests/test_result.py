"""The result line: every line the pipeline writes matches the one JSON Schema read off `Result`, and reads back as
the record it was."""

from __future__ import annotations

import json

import jsonschema
from test_leaderboard_runs import every_third_wrong, make_run

from vbench_async.sample_result import COMPLETION_FIELDS, Result, result_schema


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
