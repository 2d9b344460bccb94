"""`vbench-async preprocess` over the built-in demo benchmarks, and `vbench-async cache stats|verify|gc`."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from support.videos import truncate

from vbench_async.cli import main
from vbench_async.frames.layout import CacheLayout

SUMMARY = re.compile(r"(\d+) jobs, (\d+) unique videos: (\d+) cached, (\d+) reused, (\d+) failed")


def _preprocess(cache_dir: Path, capsys, *extra: str) -> tuple[int, tuple[int, ...], str]:
    rc = main([
        "preprocess", "--benchmarks", "demo-mc", "--family", "qwen3-vl", "--cache-dir", str(cache_dir),
        "--workers", "2", "--max-frames", "4", "--max-pixels", "16384", "--no-progress", *extra,
    ])
    out = capsys.readouterr().out
    found = SUMMARY.search(out)
    assert found, out
    return rc, tuple(int(x) for x in found.groups()), out


# The tests share one cache that the first one fills: under xdist they must run on one worker, in order.
pytestmark = pytest.mark.xdist_group("cache_cli")


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli_cache")


def test_preprocess_twice_decodes_nothing_the_second_time(filled: Path, capsys) -> None:
    rc, (jobs, unique, cached, reused, failed), _ = _preprocess(filled, capsys)
    assert rc == 0 and jobs >= unique > 0 and (cached, reused, failed) == (unique, 0, 0)
    rc, second, _ = _preprocess(filled, capsys)
    assert rc == 0 and second == (jobs, unique, 0, unique, 0)
    assert main(["cache", "stats", "--cache-dir", str(filled)]) == 0
    assert re.search(rf"entries\s+{unique} \(", capsys.readouterr().out)


def test_preprocess_under_a_budget_fills_up_to_it_and_defers_the_rest(tmp_path: Path, capsys) -> None:
    _, (_, unique, _, _, _), _ = _preprocess(tmp_path / "full", capsys)
    one_entry = max(p.stat().st_size for p in CacheLayout(tmp_path / "full").entries())
    budget_gb = 2.5 * one_entry / 1e9  # room for two of the largest entries, not for all of them
    rc, (_, _, cached, _, failed), out = _preprocess(tmp_path / "budget", capsys, "--cache-max-gb", f"{budget_gb:.9f}")
    entries = list(CacheLayout(tmp_path / "budget").entries())
    assert rc == 0 and failed == 0 and unique > 3
    # Entries of this call never evict each other: the cache holds what it decoded (the budget is overrun by at most
    # the decodes in flight when it filled: one per worker), and the rest waits for `run` to decode it on demand.
    assert 2 <= cached == len(entries) < unique and f"{unique - cached} deferred (cache budget)" in out
    assert sum(p.stat().st_size for p in entries) <= budget_gb * 1e9 + 2 * one_entry  # --workers 2


def test_verify_finds_and_deletes_a_corrupt_entry(filled: Path, capsys) -> None:
    entries = list(CacheLayout(filled).entries())
    assert entries, "the preprocess test fills this cache first"
    truncate(entries[0], 0.5)
    assert main(["cache", "verify", "--cache-dir", str(filled)]) == 1
    out = capsys.readouterr().out
    assert f"corrupt: {entries[0]}" in out and "truncated" in out
    assert main(["cache", "verify", "--quick", "--delete", "--cache-dir", str(filled)]) == 0
    assert "1 corrupt, 1 removed" in capsys.readouterr().out and not entries[0].exists()
    assert main(["cache", "verify", "--cache-dir", str(filled)]) == 0


def test_gc_removes_stale_temp_files_failures_and_old_entries(filled: Path, capsys) -> None:
    shard = next((filled / "vbf1" / "entries").iterdir())
    stale, fresh = shard / ".tmp-1-dead-x.safetensors", shard / ".tmp-2-live-y.safetensors"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"being written")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    failures = filled / "vbf1" / "failures"
    failures.mkdir(exist_ok=True)
    (failures / "0123.json").write_text('{"kind": "decode_error"}')
    n_entries = len(list(CacheLayout(filled).entries()))

    assert main(["cache", "gc", "--dry-run", "--older-than", "0", "--failures", "--cache-dir", str(filled)]) == 0
    assert f"would remove {n_entries} entries" in capsys.readouterr().out and stale.exists()
    assert main(["cache", "gc", "--cache-dir", str(filled)]) == 0
    assert "0 entries" in capsys.readouterr().out and not stale.exists() and fresh.exists()
    assert main(["cache", "gc", "--max-gb", "0", "--failures", "--cache-dir", str(filled)]) == 0
    out = capsys.readouterr().out
    assert f"removed {n_entries} entries" in out and "1 failure records" in out
    assert not list(CacheLayout(filled).entries()) and not any(failures.iterdir()) and fresh.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["preprocess", "--family", "qwen3-vl"], "--suite NAME or --benchmarks"),
        (["preprocess", "--benchmarks", "demo-mc"], "--model PATH_OR_ID or --family"),
        (["preprocess", "--benchmarks", "demo-mc", "--model", "llava-7b"], "cannot load the config of 'llava-7b'"),
        (["preprocess", "--benchmarks", "demo-mc", "--family", "qwen3-vl", "--workers", "0"], "--workers"),
        (["preprocess", "--benchmarks", "demo-mc", "--family", "qwen3-vl", "--cache-max-gb", "-1"], "--cache-max-gb"),
        (["cache", "stats", "--cache-dir", "/nonexistent/cache"], "no frame cache at /nonexistent/cache"),
        (["cache", "gc", "--max-gb", "-1"], "--max-gb: must be at least 0"),
    ],
)
def test_bad_arguments_are_user_errors(argv: list[str], message: str, capsys) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # a bound argparse checks while parsing
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_help_is_fast_and_complete(capsys) -> None:
    for argv in (["preprocess", "--help"], ["cache", "gc", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
    assert "--older-than DAYS" in capsys.readouterr().out
