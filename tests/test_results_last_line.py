"""A last line of a result file without its newline — torn by a crash mid-write, or edited by hand — is reported
with its file and line number whenever the file is read (a resuming run, the summary, `leaderboard`), never dropped
in silence; a whole valid one still counts, and the next writer completes it instead of cutting it."""

from __future__ import annotations

import json
import logging

from vbench_async.results.result_file import ResultStore, read_results


def _line(sid: str, **extra) -> bytes:
    return json.dumps({"sample_id": sid, "output": "x", "error": None, "config_hash": "h", **extra}).encode()


def _store(tmp_path, tail: bytes) -> ResultStore:
    store = ResultStore(tmp_path, "b", "h")
    with store:
        store.append({"sample_id": "a", "output": "x", "error": None})
        store.append({"sample_id": "b", "output": "x", "error": None})
    store.path.write_bytes(store.path.read_bytes() + tail)
    return store


def test_a_torn_last_line_is_reported_with_file_and_line(tmp_path, caplog) -> None:
    store = _store(tmp_path, _line("c")[:-7])  # a crash mid-write
    problems: list = []
    with caplog.at_level(logging.WARNING):
        assert list(read_results(store.path, problems=problems)) == ["a", "b"]
    assert [(b.path, b.lineno) for b in problems] == [(store.path, 3)] and "without its newline" in problems[0].problem
    assert f"{store.path}" in caplog.text and "line 3" in caplog.text
    with caplog.at_level(logging.WARNING), store:  # a resuming run: cut, and said so
        store.append({"sample_id": "c", "output": "x", "error": None})
    assert f"{store.path}:3: cut a torn last line" in caplog.text
    assert list(read_results(store.path)) == ["a", "b", "c"]


def test_an_edited_last_line_that_breaks_the_rules_is_reported_not_dropped(tmp_path) -> None:
    store = _store(tmp_path, _line("c", score=5.0))  # hand-edited, and the editor dropped the final newline
    problems: list = []
    assert "c" not in read_results(store.path, problems=problems)
    assert [b.lineno for b in problems] == [3] and "score 5.0" in problems[0].problem
    assert str(problems[0]).startswith(f"{store.path}:3:")


def test_a_whole_last_line_without_newline_counts_and_is_completed(tmp_path, caplog) -> None:
    store = _store(tmp_path, _line("c", score=1.0))
    with caplog.at_level(logging.WARNING):
        assert list(read_results(store.path)) == ["a", "b", "c"]
    assert f"{store.path}:3: the last line has no newline" in caplog.text
    with store:  # the next writer keeps it: only the newline was missing
        store.append({"sample_id": "d", "output": "x", "error": None})
    assert list(read_results(store.path)) == ["a", "b", "c", "d"]
    assert read_results(store.path)["c"].score == 1.0  # results are typed on read
