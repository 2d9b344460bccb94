"""The one table of failure kinds (`failure_kinds.FailureKind`): every kind the code can record is in it with its
fate and hint, the names written to disk stay what they were, and the sets and the console's hints derive from it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from vbench_async.cli.failures import fix_for
from vbench_async.errors import SampleError
from vbench_async.failure_kinds import (
    ENVIRONMENT_KINDS,
    FINAL_KINDS,
    TRANSIENT_KINDS,
    FailureKind,
    Fate,
    is_final_kind,
)
from vbench_async.frames.errors import FrameError

PACKAGE = Path(__file__).resolve().parents[1] / "vbench_async"

# The names result files and cache failure records hold: renaming one would orphan the lines already on disk.
ON_DISK = {
    "video_missing", "video_empty", "no_video_stream", "decode_error", "image_error", "image_too_large",
    "window_invalid", "aspect_ratio", "record_invalid", "task_type_mismatch", "path_unsafe", "context_overflow",
    "prompt_error", "engine_error", "server_error", "score_error", "result_invalid", "decode_timeout",
    "decoder_crash", "worker_error", "frame_error", "cache_contended", "server_unavailable", "cache_unwritable",
}
# The sets as they were before the table (failure_kinds.py): the table may only add to the final set.
FINAL_BEFORE = {
    "video_missing", "video_empty", "no_video_stream", "decode_error", "window_invalid", "aspect_ratio",
    "record_invalid", "path_unsafe", "task_type_mismatch", "engine_error", "server_error", "result_invalid",
}
TRANSIENT_BEFORE = {"decode_timeout", "decoder_crash", "worker_error", "frame_error", "server_unavailable",
                    "cache_contended"}
_RAISERS = {"SampleError", "FrameError"}


def test_every_kind_has_a_fate_and_a_hint():
    for kind in FailureKind:
        assert isinstance(kind.fate, Fate), kind
        assert kind.hint.strip(), f"{kind} has no hint"
        assert kind == kind.name.lower(), f"{kind!r}: the member's name is its on-disk name in capitals"


def test_the_names_on_disk_are_unchanged():
    assert {str(kind) for kind in FailureKind} == ON_DISK


def test_the_sets_derive_from_the_table_and_keep_their_members():
    assert FINAL_KINDS | TRANSIENT_KINDS | ENVIRONMENT_KINDS == set(FailureKind)
    assert not (FINAL_KINDS & TRANSIENT_KINDS or FINAL_KINDS & ENVIRONMENT_KINDS or TRANSIENT_KINDS & ENVIRONMENT_KINDS)
    assert FINAL_BEFORE <= FINAL_KINDS and TRANSIENT_KINDS == TRANSIENT_BEFORE
    assert ENVIRONMENT_KINDS == {"cache_unwritable"}
    # The kinds that were in neither set were final already (is_final_kind: anything not transient or environment).
    assert {"image_error", "image_too_large", "context_overflow", "prompt_error", "score_error"} <= FINAL_KINDS


def test_a_member_reads_and_writes_as_its_name():
    kind = FailureKind.RECORD_INVALID
    assert kind == "record_invalid" and str(kind) == "record_invalid" and f"{kind}" == "record_invalid"
    assert json.dumps({"kind": kind, kind: 1}) == '{"kind": "record_invalid", "record_invalid": 1}'
    assert "record_invalid" in FINAL_KINDS and "frame_error" in TRANSIENT_KINDS  # a plain string from disk is found
    assert FailureKind.named("record_invalid") is kind and FailureKind.named("no_such_kind") is None
    error = SampleError(kind, "bad")
    assert json.dumps({"kind": error.kind}) == json.dumps({"kind": "record_invalid"})


@pytest.mark.parametrize("kind", list(FailureKind), ids=str)
def test_the_console_and_the_fates_read_the_table(kind):
    assert fix_for(str(kind)) == kind.hint
    assert is_final_kind(str(kind)) == (kind.fate is Fate.FINAL)


def test_an_unknown_kind_from_an_older_file_is_final_with_the_generic_hint():
    assert is_final_kind("some_old_kind") and "'error' field" in fix_for("some_old_kind")


def test_frame_errors_carry_a_registered_kind():
    assert FrameError(FailureKind.DECODE_ERROR, "x").kind is FailureKind.DECODE_ERROR


def _kinds_named_in(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every kind the module names: `FailureKind.X` members, and string literals given as the first
    argument of `SampleError(...)` / `FrameError(...)` (code not yet moved to the table)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "FailureKind" \
                and node.attr.isupper():
            found.append((node.lineno, node.attr.lower()))
        elif isinstance(node, ast.Call) and node.args and getattr(node.func, "id", None) in _RAISERS:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def test_every_kind_the_code_can_record_is_in_the_table():
    # Read from the source (like tests/test_layers.py): every place that raises a per-sample failure or names a kind.
    sites = [(path.relative_to(PACKAGE.parent), line, name)
             for path in sorted(PACKAGE.rglob("*.py")) for line, name in _kinds_named_in(path)]
    assert len(sites) > 50  # the scan sees the frames, the records, the backends, scoring and the pipeline
    unknown = [f"{path}:{line}: {name}" for path, line, name in sites if FailureKind.named(name) is None]
    assert not unknown, "kinds missing from failure_kinds.FailureKind:\n  " + "\n  ".join(unknown)


def test_the_guarantees_name_every_kind_in_its_fate():
    # docs/guarantees.md's table is the readable copy of the table: each kind in the row of its fate.
    doc = (PACKAGE.parent / "docs" / "guarantees.md").read_text(encoding="utf-8")
    rows = {fate: next(line for line in doc.splitlines() if line.startswith(f"| {fate}")) for fate in Fate}
    misplaced = [f"{kind} ({kind.fate})" for kind in FailureKind if f"`{kind}`" not in rows[kind.fate]]
    assert not misplaced, "kinds missing from their row in docs/guarantees.md: " + ", ".join(misplaced)
