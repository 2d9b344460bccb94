"""Annotation paths that leave the data root (`../`, absolute, a symlink out) are refused by every command that reads
media, unless the user passes --allow-outside-root; a symlink that stays inside the root is fine either way.

Driven through `vbench-async run --backend openai` against a local chat server (no engine needed to decide a path),
`vbench-async data check` and `vbench-async preprocess`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from PIL import Image
from support.fault_server import FaultServer
from support.hostile import CARD, _good, _video, write_data_map

from vbench_async.results.lines import read_lines

ESCAPING = ("dotdot", "absolute", "symlink_out", "image_dotdot")  # record ids whose media leave the root


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paths")
    videos, outside = root / "data" / "videos", root / "outside"
    _video(videos / "inside.mp4")
    _video(outside / "secret.mp4", frames=30)  # other content than inside.mp4: its own cache entry
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(outside / "secret.png")
    (videos / "link_out.mp4").symlink_to(outside / "secret.mp4")
    (videos / "sub").mkdir()
    (videos / "sub" / "link_in.mp4").symlink_to(videos / "inside.mp4")  # stays inside: always fine
    records = [
        _good("inside", path="inside.mp4"),
        _good("symlink_in", path="sub/link_in.mp4"),
        _good("dotdot", path=os.path.relpath(outside / "secret.mp4", videos)),
        _good("absolute", path=str(outside / "secret.mp4")),
        _good("symlink_out", path="link_out.mp4"),
        _good("image_dotdot", path="inside.mp4", image_path=os.path.relpath(outside / "secret.png", videos)),
    ]
    (root / "data" / "paths.json").write_text(json.dumps(records))
    return write_data_map(root / "data", "paths.json")


def _run(data_map: Path, out: Path, url: str, *extra: str) -> dict[str, dict]:
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", CARD, "--data-root", str(data_map),
                   "--output-dir", str(out), "--cache-dir", str(out.parent / "cache"), "--max-frames", "4",
                   "--max-pixels", "16384", "--no-progress", "--no-site", "--backend", "openai", "--base-url", url,
                   *extra, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return {sid: r for f in (out / "results").glob("*.jsonl") for sid, r in read_lines(f).items()}


def test_run_refuses_escaping_paths_unless_allowed(data, tmp_path):
    with FaultServer() as server:
        refused = _run(data, tmp_path / "strict", server.url)
        allowed = _run(data, tmp_path / "open", server.url, "--allow-outside-root")
    for sid in ("inside", "symlink_in"):
        assert refused[sid]["error"] is None and allowed[sid]["error"] is None, sid
    for sid in ESCAPING:
        assert refused[sid]["error"]["kind"] == "path_unsafe", (sid, refused[sid]["error"])
        assert "outside the data root" in refused[sid]["error"]["message"] or "'..'" in refused[sid]["error"]["message"]
        assert allowed[sid]["error"] is None, (sid, allowed[sid]["error"])
    # what reached the server: the two inside samples of each run, and the escaping ones only when allowed
    assert dict(server.attempts) == {"-": 2 + 2 + len(ESCAPING)}


def test_data_check_lists_escaping_paths_unless_allowed(data):
    strict = run_cli("data", "check", CARD, "--data-root", str(data), "--json")
    report = json.loads(strict.stdout)[CARD]
    assert strict.returncode == 1
    assert sorted(line.split(":")[0] for line in report["unsafe"]) == sorted(ESCAPING)
    relaxed = run_cli("data", "check", CARD, "--data-root", str(data), "--json", "--allow-outside-root")
    assert relaxed.returncode == 0, relaxed.stdout
    assert json.loads(relaxed.stdout)[CARD]["unsafe"] == []


def test_preprocess_decodes_only_what_is_inside_unless_allowed(data, tmp_path):
    strict = run_cli("preprocess", "--benchmarks", CARD, "--data-root", str(data), "--family", "qwen2.5-vl",
                     "--cache-dir", str(tmp_path / "c1"), "--max-frames", "4", "--no-progress")
    assert "Traceback" not in strict.stderr, strict.stderr[-3000:]
    for sid in ("dotdot", "absolute", "symlink_out"):
        assert f"skipping {CARD}/{sid}:" in strict.stderr, strict.stderr
    assert "1 unique videos: 1 cached" in strict.stdout  # inside.mp4 (the inside symlink is the same content)
    relaxed = run_cli("preprocess", "--benchmarks", CARD, "--data-root", str(data), "--family", "qwen2.5-vl",
                      "--cache-dir", str(tmp_path / "c2"), "--max-frames", "4", "--no-progress",
                      "--allow-outside-root")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "skipping" not in relaxed.stderr and "2 unique videos: 2 cached" in relaxed.stdout
