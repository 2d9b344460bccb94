"""Training validation in one process: the ordinary evaluation run on the trainer's own rollout engine (HFRollout
on the tiny model, no child process, no export), a corrupt video in the held-out set. The 2-rank case (each rank its
own share, merged into one run directory) is in tests/test_train_fsdp.py, on its shared launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from support.held_out import check_scores, held_out, train_config, validate_on, validation_run

from vbench_async.errors import UserError
from vbench_async.train.config import load_config


@pytest.fixture(scope="module")
def engine():
    """One HFRollout engine on the tiny model for the module (as a rank keeps its own for the whole training)."""
    from vbench_async.demo.tiny_models import ensure_tiny_model
    from vbench_async.train.rollout import HFRollout

    model_dir = str(ensure_tiny_model("tiny-qwen2.5-vl"))
    rollout = HFRollout(model_dir, torch.device("cpu"))
    yield rollout, model_dir
    rollout.close()


@pytest.fixture(scope="module")
def datamap(tmp_path_factory) -> Path:
    return held_out(tmp_path_factory.mktemp("held-out"))


def test_a_failed_sample_is_recorded_and_the_scores_stand(tmp_path: Path, engine, datamap) -> None:
    where = validate_on(*engine, tmp_path, datamap=datamap)
    manifest = json.loads((where / "manifest.json").read_text())
    frames = manifest["run_config"]["frame_overrides"]  # every FrameSettings field, null where not set
    assert {k: v for k, v in frames.items() if v is not None} == {"max_frames": 4, "max_pixels": 3136}
    assert manifest["backend"]["name"] == "hf" and manifest["backend"]["weights"] == "step 3"
    # The frames went to the training's cache (data.cache_dir). Not counted: the run's background compactor may
    # hold a raw and a compressed copy of an entry for a moment.
    assert list((tmp_path / "cache").rglob("entries/*/*.safetensors"))


def test_more_ranks_than_videos_leaves_a_share_empty_and_the_last_shard_merges(tmp_path: Path, engine,
                                                                              datamap) -> None:
    """4 shards of a 3-video held-out set, run one after the other on one engine as 4 ranks would run them: the
    rank with no sample (the split gives ties to the lower rank: rank 3) runs an empty share and blocks nothing; there
    are no scores while a sample is missing, then the merged run's."""
    from vbench_async.train.fsdp import DistInfo
    from vbench_async.train.validation import run_dir, validate

    cfg = train_config(tmp_path, datamap=datamap)
    rollout, model_dir = engine
    # No peer watch in one process: each share reads the summary as soon as it is done.
    scores = [validate(cfg, 1, DistInfo(r, 4, r, torch.device("cpu")), rollout, model_dir, tmp_path / "out")
              for r in range(4)]
    where = run_dir(tmp_path / "out", 1)
    owners = json.loads(next((where / "results").glob("mvbench.*.shards-4.json")).read_text())["shards"]
    assert sorted(set(owners)) == [0, 1, 2]  # rank 3 had nothing to evaluate
    assert [bool(s) for s in scores] == [False, False, True, True]  # merged once rank 2 brought the last sample
    check_scores(scores[3])
    assert all((where / f"summary.shard-{r}-of-4.json").is_file() for r in range(4))


def test_a_rank_waits_for_the_others_shares_through_the_store_for_timeout_s_at_most(monkeypatch) -> None:
    """`watch.gather`: no collective; False once the timeout passes without the peer, True once every rank is in."""
    import socket
    from datetime import timedelta

    import torch.distributed as dist

    from vbench_async.train import watch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=10), wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    assert watch.start_watch(0, 2, 600.0) is not None  # a peer silent for 600 s would end this process: not here
    try:
        assert watch.gather("validation-1", timeout_s=1.0) is False
        store.set("vbench-train/post/validation-1/1", "1")  # rank 1's share is done
        assert watch.gather("validation-1", timeout_s=1.0) is True
    finally:
        watch.stop_watch(finished=True)


@pytest.mark.parametrize("run, message", [
    ({"model": "m"}, "validation.run: model cannot be set here"),
    ({"backend": "vllm"}, "validation.run: backend cannot be set here"),
    ({"sampling": {"max_tokenz": 4}}, r"unknown field\(s\) sampling.max_tokenz"),
    ({"concurrency": 0}, "concurrency must be at least 1"),
    ({"sampling": {"max_tokens": 4}}, "name validation.run.selection.benchmarks"),
])
def test_a_wrong_validation_run_is_refused_when_the_config_is_read(tmp_path: Path, run, message) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"data": {"records": "r.json"}, "validation": {"every": 2, "run": run}}))
    with pytest.raises(UserError, match=message):
        load_config(config)


@pytest.mark.slow
def test_validating_every_step_on_two_ranks_leaves_the_training_as_it_was(tmp_path: Path) -> None:
    """Two `train --nproc-per-node 2` runs, with validation after every step and without: validation syncs the
    step's weights into the rollout engines and the next rollout uses them as they are, so step 2 samples the same
    texts and rewards; val/* are logged at both steps, from runs that merged both ranks' shares."""
    import os
    import subprocess
    import sys

    datamap = held_out(tmp_path)
    # The training set: the same records with their answers as offline responses, so every group has a reward
    # signal and step 1 really changes the weights (a stale engine at step 2 would then sample other texts).
    records = [{**r, "offline_response": r["solution"]} for r in json.loads((tmp_path / "val.json").read_text())]
    (tmp_path / "train.json").write_text(json.dumps(records))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    outs = {}
    for name, validation in (("plain", {}), ("validated", {"every": 1, "run": validation_run(datamap)})):
        out = tmp_path / name
        cfg = {"model": "tiny-qwen2.5-vl", "output_dir": str(out), "seed": 3,
               "data": {"records": str(tmp_path / "train.json"), "video_dir": str(tmp_path / "suite" / "videos"),
                        "cache_dir": str(tmp_path / "cache"), "frames": {"max_frames": 4, "max_pixels": 3136},
                        "shuffle": False, "decode_workers": 1},
               "rollout": {"n": 3, "max_tokens": 4, "offline_per_group": 1},
               "train": {"steps": 2, "prompts_per_step": 2, "lr": 1e-2},
               "checkpoint": {"export": False}, "validation": validation, "logging": {"progress": False}}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        cmd = [sys.executable, "-m", "vbench_async", "train", "--nproc-per-node", "2", "--config", str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**env, "OMP_NUM_THREADS": "1"},
                              cwd=Path(__file__).resolve().parents[1])
        assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
        outs[name] = out
    rows = {n: [json.loads(line) for line in (o / "metrics.jsonl").read_text().splitlines()] for n, o in outs.items()}
    texts = {n: [json.loads(line)["text"] for line in (o / "samples.jsonl").read_text().splitlines()]
             for n, o in outs.items()}
    assert texts["plain"] == texts["validated"]
    assert [r["reward/mean"] for r in rows["plain"]] == [r["reward/mean"] for r in rows["validated"]]
    for r in rows["validated"]:
        assert 0.0 <= r["val/mvbench"] <= 1.0 and (r["val/samples"], r["val/failed"]) == (3.0, 1.0)
        assert (outs["validated"] / "validation" / f"step-{r['step']:06d}" / "summary.json").is_file()
    assert not any(k.startswith("val/") for r in rows["plain"] for k in r)
