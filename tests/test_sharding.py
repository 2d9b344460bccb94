"""Sharding: K/N parsing, cost estimates, the balanced deterministic split, the pinned plan, launcher variables."""

from __future__ import annotations

import json
import random
import threading
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from vbench_async.backends.vllm import replica_for
from vbench_async.benchmarks import resolve_benchmarks
from vbench_async.errors import SampleError, UserError
from vbench_async.evaluation.launcher import resolve_shard, select_devices, shard_from_env
from vbench_async.frames.spec import FrameSpec
from vbench_async.models import family_ref
from vbench_async.sharding import (
    Shard,
    ShardItem,
    ShardPlan,
    VideoProbe,
    balance,
    estimate_frames,
    items_for,
    make_plan,
    pinned_plan,
    probe_video,
    publish_once,
    select,
    shard_slice,
    unit_costs,
)


# -- K/N -------------------------------------------------------------------------------------------------------------
def test_shard_parse_and_tag():
    assert Shard.parse("2/4") == (2, 4)
    assert Shard.parse(" 0/1 ").tag == "shard-0-of-1"
    assert str(Shard.parse("3/8")) == "3/8"
    for bad in ("4/4", "-1/2", "1", "a/b", "1/0", ""):
        with pytest.raises(UserError, match="K/N"):
            Shard.parse(bad)


# -- cost ------------------------------------------------------------------------------------------------------------
def test_estimate_frames_follows_the_spec():
    spec = FrameSpec(family="qwen2.5-vl", fps=2.0, max_frames=32)
    assert estimate_frames(spec, VideoProbe(25.0, 250)) == 20  # 10 s at 2 fps
    assert estimate_frames(spec, VideoProbe(30.0, 30 * 600)) == 32  # capped
    assert estimate_frames(spec, VideoProbe(25.0, 250), window=(2.0, 5.0)) == 6  # 3 s window
    assert estimate_frames(spec, None) == 32  # unknown length: the cap stands in
    assert estimate_frames(spec, VideoProbe(25.0, 250), window=(100.0, 200.0)) == 32  # window past the end
    assert estimate_frames(FrameSpec(family="qwen3-vl", nframes=16), VideoProbe(25.0, 2500)) == 16
    assert estimate_frames(None, None) == 0


def test_probe_reads_the_header_of_every_demo_video():
    from fractions import Fraction

    from vbench_async.demo.suite import ensure_demo_suite

    root = ensure_demo_suite()
    facts = json.loads((root / "suite.json").read_text())["videos"]
    for v in facts:
        probe = probe_video(root / v["path"])
        assert probe == (pytest.approx(float(Fraction(v["fps"]))), v["num_frames"]), v["name"]


def test_probe_of_a_missing_or_broken_file_is_none(tmp_path):
    assert probe_video(tmp_path / "nope.mp4") is None
    (tmp_path / "junk.mp4").write_bytes(b"not a video" * 100)
    assert probe_video(tmp_path / "junk.mp4") is None


# -- the split -------------------------------------------------------------------------------------------------------
def generated_suite(n_videos: int, seed: int = 0) -> tuple[list[ShardItem], dict[Path, VideoProbe]]:
    """A suite shaped like real ones: durations from 5 s to 1 h (log-uniform), 1-6 questions per video, a few
    windowed questions, some text-only samples, three benchmarks with different frame settings."""
    rng = random.Random(seed)
    specs = {"a": FrameSpec(family="qwen2.5-vl", fps=2.0, max_frames=64),
             "b": FrameSpec(family="qwen2.5-vl", fps=1.0, max_frames=256),
             "c": FrameSpec(family="qwen2.5-vl", nframes=32)}
    items, probes = [], {}
    for v in range(n_videos):
        path = Path(f"/data/v{v:05d}.mp4")
        fps = rng.choice((24.0, 25.0, 30.0))
        probes[path] = VideoProbe(fps, int(fps * 5 * 720 ** rng.random()))
        bench = rng.choice("abc")
        for q in range(rng.randint(1, 6)):
            window = (1.0, 4.0) if rng.random() < 0.1 else None
            items.append(ShardItem(bench, f"{v}-{q}", f"video:v{v:05d}.mp4", path, specs[bench], window))
    items += [ShardItem("a", f"text-{i}", f"sample:a/text-{i}") for i in range(20)]
    return items, probes


@pytest.mark.parametrize("n_shards", [2, 4, 8])
def test_largest_shard_is_within_ten_percent_of_the_mean(n_shards):
    items, probes = generated_suite(600)
    costs = unit_costs(items, probes)
    owner = balance(costs, n_shards)
    loads = [0] * n_shards
    for key, shard in owner.items():
        loads[shard] += costs[key]
    mean = sum(loads) / n_shards
    assert max(loads) <= 1.10 * mean, loads
    # ...far better than splitting the question list into equal slices, which ignores video lengths
    naive = [0] * n_shards
    for i, key in enumerate(sorted(costs)):
        naive[i * n_shards // len(costs)] += costs[key]
    assert max(loads) - mean < (max(naive) - mean) / 2


def test_split_is_deterministic_disjoint_and_keeps_videos_together():
    items, probes = generated_suite(300, seed=1)
    costs = unit_costs(items, probes)
    first = balance(costs, 4)
    shuffled = dict(sorted(costs.items(), key=lambda _: random.random()))
    assert balance(shuffled, 4) == first  # input order does not matter
    assert set(first) == {it.group for it in items} and set(first.values()) == {0, 1, 2, 3}
    # every question of one video lands in one shard (the unit is the video)
    by_video = defaultdict(set)
    for it in items:
        by_video[it.group].add(first[it.group])
    assert all(len(s) == 1 for s in by_video.values())


def test_more_shards_than_videos_leaves_some_empty():
    costs = {"video:a": 10, "video:b": 3}
    owner = balance(costs, 4)
    assert owner == {"video:a": 0, "video:b": 1}


def demo_items(family: str = "qwen2.5-vl") -> tuple[list, list[ShardItem]]:
    loaded = [(b, b.frame_spec(family_ref(family), {}), b.load_samples(None)) for b in resolve_benchmarks("demo", None)]
    return loaded, [it for b, spec, samples in loaded for it in items_for(b, samples, spec, None)]


def test_demo_suite_split_probes_every_video_and_balances():
    _, items = demo_items()
    plan = make_plan(items, 2)
    assert plan.estimate["probed"] == plan.estimate["videos"] == 22
    mean = sum(plan.loads) / 2
    assert max(plan.loads) <= 1.10 * mean
    # demo benchmarks share videos: a video's questions from all six benchmarks go to one shard
    shards_of_video = defaultdict(set)
    for it in items:
        shards_of_video[it.group].add(plan.owner[it.group])
    assert all(len(s) == 1 for s in shards_of_video.values())
    assert any(len({it.benchmark for it in items if it.group == g}) > 1 for g in shards_of_video)


def test_shard_slices_partition_the_suite():
    loaded, _ = demo_items()
    seen: list[tuple[str, str]] = []
    for k in range(3):
        for bench, _, samples in shard_slice(Shard(k, 3), loaded, None):
            seen += [(bench.id, s.sample_id) for s in samples]
    everything = [(b.id, s.sample_id) for b, _, samples in loaded for s in samples]
    assert sorted(seen) == sorted(everything)  # each sample exactly once


def test_invalid_and_unsafe_samples_are_items_too():
    bench = resolve_benchmarks(None, ["demo-mc"])[0]
    broken = SampleError("record_invalid", "bad")
    broken.sample_id = "#7"
    good = bench.load_samples(None)[0]
    from dataclasses import replace

    escaping = replace(good, sample_id="x", video="../../etc/passwd")
    items = items_for(bench, [broken, good, escaping], bench.frame_spec(family_ref("qwen2.5-vl"), {}), None)
    assert items[0].group == "sample:demo-mc/#7" and items[0].video is None
    assert items[1].video is not None and items[1].group == f"video:{good.video}"
    assert items[2].video is None and items[2].group == "video:../../etc/passwd"
    plan = make_plan(items, 2)
    assert set(plan.owner) == {it.group for it in items}


# -- the pinned plan -------------------------------------------------------------------------------------------------
def test_first_plan_wins_even_when_estimates_differ(tmp_path):
    _, items = demo_items()
    blind = make_plan(items, 2, probe=False)  # another node that could not read any header
    publish_once(tmp_path / "shards" / f"plan-{blind.key}.json", blind.to_json())
    pinned = pinned_plan(tmp_path, items, 2)
    assert pinned.owner == blind.owner and pinned.costs == blind.costs
    assert pinned.owner != make_plan(items, 2).owner  # probing would have split differently


def test_pinned_plan_is_written_once_and_reused(tmp_path):
    _, items = demo_items()
    first = pinned_plan(tmp_path, items, 2)
    files = list((tmp_path / "shards").glob("plan-*.json"))
    assert len(files) == 1
    assert pinned_plan(tmp_path, items, 2) == ShardPlan.from_json(files[0].read_text()) == first
    assert pinned_plan(tmp_path, items, 3).count == 3  # another split: another plan file
    assert len(list((tmp_path / "shards").glob("plan-*.json"))) == 2


def test_publish_once_under_concurrency(tmp_path):
    target = tmp_path / "once.json"
    got: list[str] = []

    def writer(i: int) -> None:
        got.append(publish_once(target, json.dumps({"writer": i, "pad": "x" * 100_000})))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and got[0] == target.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["once.json"]  # no temporary files left behind


def test_index_refuses_a_shard_started_with_other_samples(tmp_path):
    loaded, items = demo_items()
    bench, _, samples = loaded[0]
    ids = [s.sample_id for s in samples]
    sel0, sel1 = select(Shard(0, 2), items, tmp_path), select(Shard(1, 2), items, tmp_path)
    path = sel0.write_index(tmp_path, bench.id, "abc123abc123", {"k": 1}, ids)
    assert sel1.write_index(tmp_path, bench.id, "abc123abc123", {"k": 1}, ids) == path
    index = json.loads(path.read_text())
    assert index["sample_ids"] == ids and set(index["shards"]) == {0, 1}
    kept = sel0.keep(bench.id, samples) + sel1.keep(bench.id, samples)
    assert sorted(s.sample_id for s in kept) == sorted(ids)
    with pytest.raises(UserError, match="different samples"):
        sel1.write_index(tmp_path, bench.id, "abc123abc123", {"k": 1}, ids[:-1])


# -- launchers -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env, expected", [
    ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}, (3, 4)),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "1"}, (4, 8)),
    ({"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
      "SLURM_ARRAY_TASK_STEP": "2"}, (3, 4)),
    ({"SLURM_PROCID": "2", "SLURM_NTASKS": "3"}, (2, 3)),
    ({"VBENCH_ASYNC_SHARD": "1/2", "RANK": "0", "WORLD_SIZE": "8"}, (1, 2)),
])
def test_shard_from_launcher_variables(env, expected):
    assert shard_from_env(env)[0] == expected
    assert resolve_shard("auto", env) == expected


def test_shard_option_edge_cases():
    assert resolve_shard(None, {}) is None
    assert resolve_shard("auto", {}) is None  # no launcher: everything
    assert resolve_shard("auto", {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None
    assert resolve_shard("0/1", {}) is None  # one shard is no split
    assert resolve_shard("1/3", {"RANK": "0", "WORLD_SIZE": "2"}) == (1, 3)  # explicit beats the environment
    with pytest.raises(UserError, match="evenly"):
        resolve_shard("auto", {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "3"})
    with pytest.raises(UserError, match="not an integer"):
        resolve_shard("auto", {"RANK": "x", "WORLD_SIZE": "2"})


def test_gpu_blocks_per_local_process():
    torchrun = {"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4"}
    assert select_devices("auto", 2, torchrun) == ["4", "5"]
    assert select_devices("auto", 1, {**torchrun, "CUDA_VISIBLE_DEVICES": "7,6,5,4"}) == ["5"]
    assert select_devices("auto", 2, {**torchrun, "CUDA_VISIBLE_DEVICES": "3,1"}) is None  # scheduler chose
    assert select_devices("auto", 4, {}) is None  # one process per node: nothing to choose
    assert select_devices("auto", 1, {"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2(x3)"}) == ["1"]
    assert select_devices("2,3", 2, {}) == ["2", "3"]
    assert select_devices("1", 1, {"CUDA_VISIBLE_DEVICES": "4,5"}) == ["5"]
    with pytest.raises(UserError, match="needs tensor-parallel"):
        select_devices("0,1,2", 2, {})
    with pytest.raises(UserError, match="shows 2"):
        select_devices("0,5", 2, {"CUDA_VISIBLE_DEVICES": "4,5"})
    with pytest.raises(UserError, match="fewer processes"):
        select_devices("auto", 2, {**torchrun, "CUDA_VISIBLE_DEVICES": "0,1,2,3"})


def test_replica_affinity_is_stable_and_spread():
    keys = [f"{i:032x}" for i in range(4000)]
    picks = [replica_for(k, 8) for k in keys]
    assert picks == [replica_for(k, 8) for k in keys]
    counts = np.bincount(picks, minlength=8)
    assert counts.min() > 0.8 * 500 and counts.max() < 1.2 * 500
