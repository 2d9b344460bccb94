"""Shards under a launcher that stops the whole job when one process exits non-zero (torchrun, srun): a shard whose
samples all have result lines exits 0, failures included, so its siblings run to completion; `merge` and the
summaries still say what failed.

The torchrun test is real: `python -m torch.distributed.run` with two processes, sending their requests to the shared
vLLM server (`vllm_server`), one shard holding a sample whose video is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, SERVER_GROUP, run_cli, served_args
from support.hostile import _good, run_args, unified_suite

from vbench_async.evaluation.launcher import gang_launcher


@pytest.mark.parametrize("env, expected", [
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "torchrun"),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "torchrun"),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, "srun"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None),
    ({"VBENCH_ASYNC_SHARD": "1/2", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, None),
    ({}, None),
])
def test_which_launchers_stop_the_job_on_a_failed_process(env, expected):
    assert gang_launcher(env) == expected


@pytest.mark.vllm
@SERVER_GROUP
def test_a_torchrun_shard_with_a_failed_sample_leaves_its_siblings_running(tmp_path, vllm_server):
    data_map = unified_suite(tmp_path / "data", n_videos=4, questions_per_video=1, max_s=2.0)
    annotation = tmp_path / "data" / "annotations.json"
    records = json.loads(annotation.read_text())
    records.append(_good("lost-video", path="not_there.mp4"))  # recorded as video_missing, in one shard
    annotation.write_text(json.dumps(records))
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "VBENCH_ASYNC_SHARD")}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "vbench_async",
         *run_args(data_map, out, tmp_path / "cache", *served_args(vllm_server), "--shard", "auto", "--no-site",
                   "--workers", "1")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "exit 0 under torchrun although 1 sample(s) failed" in proc.stderr
    for k in range(2):
        assert json.loads((out / f"summary.shard-{k}-of-2.json").read_text())["complete"] is True
    summary = json.loads((out / "summary.json").read_text())  # the last shard merged both
    (bench,) = summary["benchmarks"].values()
    assert bench["n_total"] == len(records) and bench["n_failed"] == 1
    merged = run_cli("merge", str(out), "--no-site")
    assert merged.returncode == 1 and "1 sample(s) failed" in merged.stderr, merged.stderr[-3000:]
