"""`vbench-async leaderboard` takes what users point it at: the README's `leaderboard runs/* -o site/` after `make demo`
and `make demo-rl` (runs/demo is a run; runs/demo-rl holds its runs two levels down, beside a frame cache, a site, a
trained model and training files), a glob that also matches non-run files and folders (skipped with one note naming
them, never silently), and it says exactly which runs it included."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_leaderboard_runs import every_third_wrong, make_run, right

from vbench_async.cli import main
from vbench_async.leaderboard.site import MARKER

BENCHMARKS = ("demo-mc", "demo-yesno")


@pytest.fixture(scope="module")
def runs_folder(tmp_path_factory) -> Path:
    """runs/ as `make demo` and `make demo-rl` leave it, plus a note and an empty folder a glob also matches."""
    root = tmp_path_factory.mktemp("inputs") / "runs"
    make_run(root / "demo", "tiny-qwen2.5-vl", every_third_wrong, benchmarks=BENCHMARKS)
    rl = root / "demo-rl"
    make_run(rl / "runs" / "untrained", "tiny-qwen2.5-vl", every_third_wrong, benchmarks=BENCHMARKS)
    make_run(rl / "runs" / "rl-trained", "tiny-qwen2.5-vl-rl", right, benchmarks=BENCHMARKS)
    entry = rl / "cache" / "vbf1" / "entries" / "ab"
    entry.mkdir(parents=True)
    (entry / "ab12.safetensors").write_bytes(b"\0" * 16)
    (rl / "site").mkdir()
    (rl / "site" / MARKER).write_text('{"files": []}\n')
    (rl / "tiny-qwen2.5-vl-rl").mkdir()
    (rl / "tiny-qwen2.5-vl-rl" / "config.json").write_text("{}")
    (rl / "train.yaml").write_text("model: tiny-qwen2.5-vl\n")
    (rl / "demo_rl.json").write_text("{}")
    (root / "notes.txt").write_text("what I ran\n")
    (root / "scratch").mkdir()
    return root


INCLUDED = ["demo (tiny-qwen2.5-vl, 2 benchmarks)",
            "demo-rl/runs/rl-trained (tiny-qwen2.5-vl-rl, 2 benchmarks)",
            "demo-rl/runs/untrained (tiny-qwen2.5-vl, 2 benchmarks)"]


def _site_runs(site: Path) -> list[str]:
    return sorted(r["dir_name"] for r in json.loads((site / "data" / "runs.json").read_text()))


def test_the_readme_glob_after_demo_and_demo_rl(runs_folder, tmp_path):
    """`vbench-async leaderboard runs/* -o site/` as a shell expands it (sorted names, hidden ones left out): the
    glob's files and run-less folders are named in one note, the nested runs are found, and the command lists the
    three runs it included. (No shell here: tests/test_security_code.py refuses shell command lines.)"""
    root = runs_folder.parent
    site = tmp_path / "site"
    expanded = sorted(glob.glob("runs/*", root_dir=root))
    proc = subprocess.run([sys.executable, "-m", "vbench_async", "leaderboard", *expanded, "-o", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    listed = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert listed == [f"runs/{x}" for x in INCLUDED]
    assert "including 3 run(s):" in proc.stdout and proc.stdout.rstrip().splitlines()[-1].startswith(
        "leaderboard of 3 run(s): ")
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: skipped 2 path(s) holding no result directory (no summary.json in or up to 3 levels "
                     "below): runs/notes.txt, runs/scratch"]
    assert _site_runs(site) == ["demo", "rl-trained", "untrained"]


def test_a_folder_of_runs_includes_the_nested_ones(runs_folder, tmp_path, capsys):
    """`leaderboard runs -o site/` no longer leaves out demo-rl's runs; a run named twice is included once."""
    assert main(["leaderboard", str(runs_folder), str(runs_folder / "demo"), "-o", str(tmp_path / "s")]) == 0
    out, err = capsys.readouterr()
    assert [x.removeprefix(f"{runs_folder}/") for x in (line.strip() for line in out.splitlines()
                                                         if line.startswith("  "))] == INCLUDED
    assert "note:" not in err  # nothing given was skipped: runs/ held runs
    assert _site_runs(tmp_path / "s") == ["demo", "rl-trained", "untrained"]


def test_run_less_paths_alone_are_an_error_and_a_typo_is_named(runs_folder, tmp_path, capsys):
    assert main(["leaderboard", str(runs_folder / "scratch"), str(runs_folder / "notes.txt"),
                 "-o", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "no result directory" in err and "scratch" in err and "notes.txt" in err
    assert main(["leaderboard", str(runs_folder / "demo"), str(runs_folder / "dmeo"), "-o", str(tmp_path / "t")]) == 2
    assert "dmeo does not exist" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()  # nothing written


def test_a_site_folder_is_skipped_not_searched(runs_folder, tmp_path, capsys):
    """An earlier site among the paths (it holds copies of nothing we read) is named in the note."""
    site = tmp_path / "old-site"
    assert main(["leaderboard", str(runs_folder / "demo"), "-o", str(site)]) == 0
    (site / "runs" / "copy").mkdir(parents=True)
    (site / "runs" / "copy" / "summary.json").write_text("{}")  # a folder in a site is never taken for a run
    capsys.readouterr()
    assert main(["leaderboard", str(runs_folder / "demo"), str(site), "-o", str(tmp_path / "new")]) == 0
    out, err = capsys.readouterr()
    assert "including 1 run(s):" in out and f"holding no result directory (no summary.json in or up to 3 levels " \
        f"below): {site}" in err
