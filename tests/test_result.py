"""The result line: every line the pipeline writes matches the one JSON Schema read off `Result`, and reads back as
the record it was."""

from __future__ import annotations

import json

import jsonschema

from test_leaderboard_runs import every_third_wrong, make_run
from vbench_async.result import COMPLETION_FIELDS, Result, result_schema


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
