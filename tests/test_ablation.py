"""Input ablations (`run --ablation`): what each one does to the frames and their metadata, and that an ablated run
reaches the backend as its own run (own result file, each line saying what the model got), on one engine with the
real run when several are listed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from vbench_async.backends.base import VideoInput
from vbench_async.frames.ablation import ABLATIONS, ablate, ablate_frames

META = {"fps": 25.0, "duration": 8.0, "total_num_frames": 200, "frames_indices": [0, 25, 50, 75, 100, 125],
        "width": 64, "height": 48, "video_backend": "pyav"}


def frames(n: int = 6) -> np.ndarray:
    return np.stack([np.full((4, 6, 3), 10 * (i + 1), dtype=np.uint8) for i in range(n)])


def test_blank_takes_every_pixel_and_keeps_the_timing():
    out, meta = ablate_frames(frames(), META, "blank", "k")
    assert out.shape == frames().shape and not out.any() and meta == META


def test_shuffle_and_reverse_reorder_the_frames_and_keep_their_timestamps():
    f = frames()
    shuffled, meta = ablate_frames(f, META, "shuffle", "key-a")
    order = [int(x[0, 0, 0]) // 10 - 1 for x in shuffled]
    assert sorted(order) == list(range(6)) and order != list(range(6)) and meta == META
    assert (ablate_frames(f, META, "shuffle", "key-a")[0] == shuffled).all()  # fixed per video
    reversed_, meta = ablate_frames(f, META, "reverse", "k")
    assert (reversed_ == f[::-1]).all() and meta == META
    two = frames(2)
    assert not (ablate_frames(two, META, "shuffle", "any")[0] == two).all()  # never the identity


def test_fps_and_timestamps_change_only_the_timing():
    f = frames()
    same, meta = ablate_frames(f, META, "fps", "k")
    assert (same == f).all() and meta["fps"] == 50.0 and meta["duration"] == 4.0
    assert meta["frames_indices"] == META["frames_indices"]
    same, meta = ablate_frames(f, META, "timestamps", "k")
    assert (same == f).all() and meta["frames_indices"] == list(range(6)) and meta["fps"] == 25.0


def test_an_ablated_video_gets_its_own_uuid_and_an_unknown_kind_is_refused():
    video = VideoInput(frames=frames(), metadata=dict(META), uuid="entry")
    assert ablate(video, None) is video
    for kind in ABLATIONS:
        assert ablate(video, kind).uuid == f"entry:ablation-{kind}"  # an engine's cache never serves the real ones
    with pytest.raises(ValueError, match="unknown ablation"):
        ablate(video, "upside-down")


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for p in sorted((run_dir / "results").glob("*.jsonl")) for line in
            p.read_text().splitlines()]


def test_a_list_of_ablations_runs_each_as_its_own_run_side_by_side(tmp_path):
    out = tmp_path / "run"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--backend", "hf", "--benchmarks", "demo-yesno",
                   "--max-samples", "3", "--max-tokens", "2", "--ablation", "none,blank,reverse", "--output-dir",
                   str(out), "--no-progress", "--workers", "1", "--no-site")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    real, blank, reverse = _lines(out), _lines(out / "ablation-blank"), _lines(out / "ablation-reverse")
    assert len(real) == len(blank) == len(reverse) == 3
    assert all("ablation" not in r["frames"] for r in real)  # a real run's lines are as they were
    assert {r["frames"]["ablation"] for r in blank} == {"blank"}
    assert {r["frames"]["ablation"] for r in reverse} == {"reverse"}
    assert len({real[0]["config_hash"], blank[0]["config_hash"], reverse[0]["config_hash"]}) == 3
    table = proc.stdout[proc.stdout.index("scores by input"):].splitlines()
    assert table[1].split() == ["benchmark", "chance", "frames", "blank", "reverse"]
    assert table[2].split()[:2] == ["demo-yesno", "50.00"]
    manifest = json.loads((out / "ablation-blank" / "manifest.json").read_text())
    assert manifest["run_config"]["ablation"] == "blank"


def test_an_unknown_ablation_is_refused_before_any_work(tmp_path):
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-yesno", "--ablation", "none,sideways",
                   "--output-dir", str(tmp_path / "run"))
    assert proc.returncode == 2 and "unknown ablation sideways" in proc.stderr
    assert not (tmp_path / "run").exists()
