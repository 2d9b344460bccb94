"""Training configs: strict YAML parsing, overrides, presets, cross-field checks, and the example configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from vbench_async.errors import UserError
from vbench_async.train.config import RolloutEngine, TrainConfig, load_config
from vbench_async.train.resume_identity import resume_changes

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_minimal_config_gets_the_preset_of_its_algorithm(tmp_path):
    cfg = load_config(_write(tmp_path, "data: {records: r.json}\nalgorithm: {name: dapo}\n"))
    assert isinstance(cfg, TrainConfig)
    a = cfg.algorithm
    assert (a.advantage, a.loss_agg, a.clip_low, a.clip_high, a.dynamic_sampling) == \
        ("grpo", "token-mean", 0.2, 0.28, True)


def test_explicit_values_win_over_the_preset_and_overrides_win_over_the_file(tmp_path):
    path = _write(tmp_path, "data: {records: r.json}\nalgorithm: {name: gspo, clip_high: 0.001}\nrollout: {n: 4}\n")
    cfg = load_config(path, ["rollout.n=6", "train.lr=1e-5", "data.frames={max_frames: 8}"])
    assert cfg.algorithm.ratio == "sequence" and cfg.algorithm.clip_high == 0.001
    assert cfg.rollout.n == 6 and cfg.train.lr == 1e-5 and cfg.data.frames.to_dict() == {"max_frames": 8}


@pytest.mark.parametrize("text, message", [
    ("data: {records: r.json}\nrollout: {nn: 4}\n", r"unknown field\(s\) rollout.nn.*did you mean rollout.n\?"),
    ("data: {records: r.json}\nrollout: {n: four}\n", "rollout.n must be int"),
    ("data: {records: r.json}\nrollout: {n: 1}\n", "at least 2"),
    ("data: {records: r.json}\nalgorithm: {name: ppo}\n", "algorithm.name must be one of grpo.*not 'ppo'"),
    ("data: {records: r.json}\nalgorithm: {kl: k3}\n", "kl_coef"),
    ("data: {records: r.json, benchmark: mvbench}\n", "exactly one of"),
    ("data: {records: r.json}\nrollout: {n: 4, offline_per_group: 4}\n", "offline_per_group"),
    ("data: {records: r.json}\ntrain: {prompts_per_step: 6, mini_batches: 4}\n", "multiple of train.mini_batches"),
    ("data: {records: r.json}\nvalidation: {every: 5}\n", "validation.run.selection.benchmarks"),
    ("- a list\n", "mapping"),
    ("data: {records: r.json}\nrollout: {temperature: 0}\n", "rollout.temperature must be more than 0"),
    ("data: {records: r.json}\nrollout: {max_tokens: 512, max_model_len: 512}\n", "no room is left for the prompt"),
    ("data: {records: r.json}\nalgorithm: {overlong_buffer: 300}\n", "overlong_buffer"),
    ("data: {records: r.json}\nrollout: {engine: sglang}\n", "rollout.engine must be one of auto, hf, vllm, not 'sg"),
    ("data: {records: r.json}\nrollout: {engine: hf, tensor_parallel_size: 2}\n", "needs the vllm engine"),
])
def test_bad_configs_name_the_problem(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        load_config(_write(tmp_path, text))


def test_the_rollout_engine_is_a_declared_kind(tmp_path):
    auto = load_config(_write(tmp_path, "data: {records: r.json}\n")).rollout
    assert (auto.kind(gpu=True), auto.kind(gpu=False)) == (RolloutEngine.VLLM, RolloutEngine.HF)
    hf = load_config(_write(tmp_path, "data: {records: r.json}\nrollout: {engine: hf}\n")).rollout
    assert hf.kind(gpu=True) is RolloutEngine.HF  # a kind named is the kind used, on any device


def test_bad_override_syntax(tmp_path):
    with pytest.raises(UserError, match="KEY=VALUE"):
        load_config(_write(tmp_path, "data: {records: r.json}\n"), ["rollout.n"])


def test_config_hash_ignores_cadence_but_not_what_is_trained(tmp_path):
    path = _write(tmp_path, "data: {records: r.json}\n")
    base = load_config(path).hash()
    assert load_config(path, ["train.steps=500", "checkpoint.every=7", "logging.progress=false"]).hash() == base
    assert load_config(path, ["train.lr=0.5"]).hash() != base


RUNTIME = ["train.micro_batch_size=2", "train.max_tokens_per_micro_batch=4096", "train.gradient_checkpointing=true",
           "train.logprob_chunk=64", "rollout.vllm_gpu_memory_utilization=0.5", "rollout.vllm_sleep_level=1",
           "fsdp.timeout_s=60", "fsdp.peer_timeout_s=20", "fsdp.offload_rollout=true", "data.cache_dir=/elsewhere",
           "data.decode_workers=2"]


def test_runtime_knobs_may_change_on_resume_and_are_listed_old_to_new(tmp_path):
    """Resume by global step: the knobs people turn after an out-of-memory or a hang are outside the identity."""
    path = _write(tmp_path, "data: {records: r.json}\n")
    saved = load_config(path)
    state = {"config_hash": saved.hash(), "config": saved.to_dict()}
    for knob in RUNTIME:
        assert load_config(path, [knob]).hash() == saved.hash(), knob
    changed = load_config(path, ["train.micro_batch_size=2", "fsdp.timeout_s=60", "train.steps=500"])
    assert resume_changes(changed, state, "ckpt") == ["fsdp.timeout_s: 1800.0 -> 60.0",
                                                      "train.micro_batch_size: 8 -> 2", "train.steps: 100 -> 500"]
    assert resume_changes(load_config(path, RUNTIME), state, "ckpt")  # all of them at once
    assert resume_changes(saved, state, "ckpt") == []


def test_a_resume_that_changes_what_is_trained_is_refused_naming_the_setting(tmp_path):
    path = _write(tmp_path, "data: {records: r.json}\n")
    saved = load_config(path)
    state = {"config_hash": saved.hash(), "config": saved.to_dict()}
    with pytest.raises(UserError, match=r"cannot resume from ckpt: .*configuration \(train.lr: 1e-06 -> 0.5\)"):
        resume_changes(load_config(path, ["train.lr=0.5", "train.micro_batch_size=2"]), state, "ckpt")
    with pytest.raises(UserError, match=r"rollout.n: 8 -> 4"):
        resume_changes(load_config(path, ["rollout.n=4"]), state, "ckpt")


def test_a_checkpoint_without_its_config_resumes_by_hash_old_or_new(tmp_path):
    """trainer_state.json of older checkpoints holds only the hash, computed with the runtime knobs in it."""
    path = _write(tmp_path, "data: {records: r.json}\n")
    cfg = load_config(path)
    assert cfg.legacy_hash() != cfg.hash()
    assert resume_changes(cfg, {"config_hash": cfg.legacy_hash()}, "ckpt") == []
    assert resume_changes(cfg, {"config_hash": cfg.hash()}, "ckpt") == []
    with pytest.raises(UserError, match="predates checkpoints that record their config"):  # no knob known to change
        resume_changes(load_config(path, ["train.micro_batch_size=2"]), {"config_hash": cfg.legacy_hash()}, "ckpt")


@pytest.mark.parametrize("path", sorted((REPO / "examples" / "train").glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_parse(path):
    cfg = load_config(path)
    assert cfg.train.steps > 0


def test_dapo_gets_overlong_shaping_and_gspo_several_mini_batches(tmp_path):
    dapo = load_config(_write(tmp_path, "data: {records: r.json}\n"
                              "algorithm: {name: dapo}\nrollout: {max_tokens: 500}\n"))
    assert dapo.algorithm.overlong_buffer == 100 and dapo.train.mini_batches == 1  # DAPO: 4,096 of 20,480
    gspo = load_config(_write(tmp_path, "data: {records: r.json}\n"
                              "algorithm: {name: gspo}\ntrain: {prompts_per_step: 6}\n"))
    assert gspo.train.mini_batches == 3 and gspo.algorithm.overlong_buffer == 0  # largest divisor of 6 up to 4
    explicit = load_config(_write(tmp_path, "data: {records: r.json}\n"
                              "algorithm: {name: gspo}\ntrain: {mini_batches: 1}\n"))
    assert explicit.train.mini_batches == 1
    assert load_config(_write(tmp_path, "data: {records: r.json}\n")).train.mini_batches == 1  # grpo
