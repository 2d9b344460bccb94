"""Training ends cleanly when a rank is lost (CPU, gloo, real torchrun).

(A corrupt video on 2 "nodes" is checked in tests/test_train_fsdp.py, on the launch that also checkpoints.)
- A rank that freezes (SIGSTOP: alive, but never reaching the next collective) ends the other rank within a minute,
  with a message naming it, although the collective timeout is 30 minutes (slow: `-m slow`).
- The failure notice and heartbeat checks of the peer watch, through a real TCP store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import free_port, launcher_env

REPO = Path(__file__).resolve().parents[1]
LAUNCH_TIMEOUT_S = 420




@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from vbench_async.demo.suite import generate_suite

    root = tmp_path_factory.mktemp("faults")
    generate_suite(root / "suite", n_videos=2, questions_per_video=2, min_s=2.0, max_s=3.0, workers=1)
    videos = root / "suite" / "videos"
    (videos / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(4096))  # a header, then noise
    mc = json.loads((root / "suite" / "annotations" / "mc.json").read_text())
    records = [{**r, "offline_response": r["solution"]} for r in mc if r.get("path")]
    records.insert(1, {"problem_id": "corrupt", "problem": "What happens?", "problem_type": "multiple choice",
                       "options": ["A. a", "B. b"], "solution": "<answer>A</answer>", "path": "corrupt.mp4",
                       "offline_response": "<answer>A</answer>"})
    (root / "train.json").write_text(json.dumps(records))
    return root


def _config(root: Path, out: Path, **sections) -> Path:
    cfg = {
        "model": "tiny-qwen2.5-vl",
        "output_dir": str(out),
        "seed": 3,
        "data": {"records": str(root / "train.json"), "video_dir": str(root / "suite" / "videos"),
                 "cache_dir": str(root / "cache"), "frames": {"max_frames": 4, "max_pixels": 3136},
                 "decode_workers": 1},
        "rollout": {"n": 2, "max_tokens": 4, "offline_per_group": 1},
        "train": {"steps": 2, "prompts_per_step": 2, "micro_batch_size": 4, "lr": 1e-3},
        "checkpoint": {"every": 0, "export": False},
        "logging": {"progress": False},
    }
    for section, values in sections.items():
        cfg.setdefault(section, {}).update(values)
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def _rank_process(launcher: psutil.Process, rank: int) -> psutil.Process | None:
    for child in launcher.children(recursive=True):
        try:
            if child.environ().get("RANK") == str(rank):
                return child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


@pytest.mark.slow  # ~100 s on 2 cores; the watch's checks themselves run in the default suite (below)
def test_a_frozen_rank_ends_the_run_within_a_minute_with_a_message(data, tmp_path):
    out = tmp_path / "hang"
    config = _config(data, out, train={"steps": 200}, fsdp={"timeout_s": 1800, "peer_timeout_s": 20})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "vbench_async.train", "--config", str(config)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launcher_env(),
                            cwd=REPO)
    frozen = None
    try:
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        metrics = out / "metrics.jsonl"
        while not (metrics.is_file() and metrics.read_text().strip()):
            assert proc.poll() is None, proc.communicate()[1][-6000:]
            assert time.monotonic() < deadline, "training never reached step 1"
            time.sleep(1)
        frozen = _rank_process(psutil.Process(proc.pid), 1)
        assert frozen is not None
        frozen.send_signal(signal.SIGSTOP)  # rank 1 stays alive but never joins the next collective
        stopped_at = time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            pytest.fail("rank 0 kept waiting for the frozen rank 1")
        elapsed = time.monotonic() - stopped_at
    finally:
        if frozen is not None and frozen.is_running():
            frozen.kill()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "rank 0 stops: rank 1 has shown no sign of life" in stderr, stderr[-4000:]
    print(f"\nrank 1 frozen -> launcher exited after {elapsed:.0f} s")
    assert elapsed < 120  # 20 s without heartbeats, then the launcher's own shutdown of the frozen process


def test_the_peer_watch_relays_a_failure_and_notices_a_silent_peer(monkeypatch):
    import torch.distributed as dist

    from vbench_async.train.watch import PeerWatch

    port = free_port()
    master = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    watches = [PeerWatch(rank, 2, timeout_s=1000) for rank in (0, 1)]
    for w in watches:  # checked by hand here: a background check that fires would end pytest itself
        w.close(finished=False)
    a, b = watches
    assert b._check() is None and a._check() is None  # both beat; a has seen b's latest count
    a.timeout_s = 0.2
    time.sleep(0.5)
    assert "rank 1 has shown no sign of life" in a._check()  # b's counter has not moved since a last looked
    b._check()
    assert a._check() is None  # it moved again
    b.report("RuntimeError: out of memory")
    assert a._check() == "rank 1 failed: RuntimeError: out of memory"
    assert b._check() is None  # the failing rank leaves on its own, with its traceback
    del master
