"""The CPU rehearsal of the prepared GPU check (perf/gpu_train_check.py --cpu-dry-run) on a fresh home: no tiny model
built beforehand, 2 ranks under real torchrun (gloo), one model, 2 steps + a resumed launch, the packing check.

It used to fail exactly as the first GPU run would have: the model was built inside the launch's process group, where
transformers writes on global rank 0 only, so a rank other than 0 holding the build lock published a directory with
no config.json or weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_rehearsal_passes_on_a_fresh_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    env.update(VBENCH_ASYNC_HOME=str(home), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "perf/gpu_train_check.py", "--cpu-dry-run", "--families",
                           "tiny-qwen2.5-vl", "--steps", "2", "--workdir", str(tmp_path / "work"), "--budget-s", "500"],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    summary = [line for line in proc.stdout.splitlines() if line.startswith("SUMMARY")]
    assert proc.returncode == 0 and summary, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert summary[0].startswith("SUMMARY gpu_train_check=pass (cpu-dry-run 2x gloo")
    assert "run_a=ok,resume=ok" in summary[0] and "packed_sdpa=ok" in summary[0]
    assert (home / "models" / "tiny-qwen2.5-vl-v2" / "config.json").is_file()  # built here, before the launches
