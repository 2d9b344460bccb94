"""`vbench-async train`: config checked up front, then the torchrun command (shown here with --dry-run)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vbench_async", "train", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_dry_run_prints_the_torchrun_command(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("data: {records: r.json}\n")
    proc = _cli("--config", str(cfg), "--nproc-per-node", "4", "--set", "rollout.n=4", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout.strip())
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node"] and cmd[4] == "4"
    assert "--standalone" in cmd
    assert cmd[-6:] == ["-m", "vbench_async.train", "--config", str(cfg), "--set", "rollout.n=4"]
    multi = _cli("--config", str(cfg), "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--dry-run")
    assert multi.returncode == 0 and "--node_rank 1 --master_addr 10.0.0.1" in multi.stdout


def test_bad_configs_fail_before_launching(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("data: {records: r.json}\nrollout: {n: 1}\n")
    proc = _cli("--config", str(cfg))
    assert proc.returncode == 2 and "rollout.n must be at least 2" in proc.stderr and "Traceback" not in proc.stderr
    missing = _cli("--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such config file" in missing.stderr
    nodes = _cli("--config", str(tmp_path / "cfg.yaml"), "--set", "rollout.n=2", "--nnodes", "2", "--dry-run")
    assert nodes.returncode == 2 and "--master-addr" in nodes.stderr
