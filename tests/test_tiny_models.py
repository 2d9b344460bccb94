"""Tiny checkpoints: every family's builds deterministically; the Qwen-VL ones load with transformers offline and
generate from video (the other families' are checked in tests/test_families.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vbench_async.demo._atomic import IncompleteBuild, build_once
from vbench_async.demo.tiny_models import QWEN_TINY_MODELS, TINY_MODELS, ensure_tiny_model, model_dir, resolve_model
from vbench_async.errors import UserError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    for name in TINY_MODELS:
        ensure_tiny_model(name, home)
    return home


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_layout_and_vocab(home: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    for name in QWEN_TINY_MODELS:
        d = model_dir(name, home)
        for f in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                  "processor_config.json", "chat_template.jinja"):
            assert (d / f).is_file(), f"{name} lacks {f}"
        tok = AutoTokenizer.from_pretrained(d)
        cfg = AutoConfig.from_pretrained(d)
        assert cfg.text_config.vocab_size == len(tok)
        assert cfg.text_config.hidden_size // cfg.text_config.num_attention_heads == 64  # vLLM CPU attention
        assert cfg.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
        assert cfg.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
        assert cfg.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
        assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
        text = 'Where is the red circle? <answer>{"time": [1.5, 3.0]}</answer> Ünïcode'
        ids = tok(text)["input_ids"]
        assert tok.decode(ids) == text
        assert len(ids) < len(text.encode()) // 2  # the BPE actually merges


def _frames(n: int, h: int, w: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", QWEN_TINY_MODELS)
def test_generate_from_cached_frames(home: Path, name: str) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    d = model_dir(name, home)
    proc = AutoProcessor.from_pretrained(d)
    model = AutoModelForImageTextToText.from_pretrained(d)
    assert type(model).__name__.startswith({"tiny-qwen2-vl": "Qwen2VL", "tiny-qwen2.5-vl": "Qwen2_5_VL",
                                            "tiny-qwen3-vl": "Qwen3VL"}[name])
    # 8 frames sampled at 1 fps from a 30 fps, 8 s source: what the frame cache hands over.
    indices = list(range(0, 240, 30))
    meta = {"total_num_frames": 240, "fps": 30.0, "frames_indices": indices, "duration": 8.0,
            "width": 160, "height": 96}
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What moves?"}]}]
    text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[text], videos=[torch.from_numpy(_frames(8, 96, 160))], video_metadata=[meta],
                  do_sample_frames=False, return_tensors="pt")
    inputs.pop("video_metadata", None)
    t, gh, gw = inputs["video_grid_thw"][0].tolist()
    assert t == 4  # all 8 frames kept (temporal patch 2), not re-sampled
    n_pad = int((inputs["input_ids"][0] == model.config.video_token_id).sum())
    assert n_pad == t * gh * gw // 4  # spatial merge 2x2
    prompt = proc.decode(inputs["input_ids"][0])
    if name == "tiny-qwen3-vl":  # timestamps come from the metadata: mean of each index pair / fps
        assert "<0.5 seconds>" in prompt and "<6.5 seconds>" in prompt
    if name == "tiny-qwen2.5-vl":  # 2 frames per temporal patch at 1 fps sampling
        assert inputs["second_per_grid_ts"][0] == pytest.approx(2.0)
    out = model.generate(**inputs, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1]:]
    assert new.shape[0] == 6 and int(new.max()) < len(proc.tokenizer)


def test_build_is_deterministic(home: Path, tmp_path: Path) -> None:
    for name in TINY_MODELS:
        again = ensure_tiny_model(name, tmp_path)
        first = model_dir(name, home)
        files = sorted(p.name for p in first.iterdir())
        assert files == sorted(p.name for p in again.iterdir())
        for f in files:
            assert (first / f).read_bytes() == (again / f).read_bytes(), f"{name}/{f} differs between builds"


def test_second_call_is_instant(home: Path) -> None:
    d = model_dir("tiny-qwen2-vl", home)
    mtime = (d / "model.safetensors").stat().st_mtime_ns
    t0 = time.perf_counter()
    assert ensure_tiny_model("tiny-qwen2-vl", home) == d
    assert time.perf_counter() - t0 < 0.05
    assert (d / "model.safetensors").stat().st_mtime_ns == mtime


def test_build_once_races_and_failures(tmp_path: Path) -> None:
    target = tmp_path / "thing-v1"
    calls: list[int] = []

    def slow_build(out: Path) -> None:
        calls.append(1)
        time.sleep(0.2)
        (out / "data.txt").write_text("ok")

    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(build_once(target, slow_build))) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [target] * 4 and len(calls) == 1  # the lock makes the others wait, not rebuild
    assert (target / "data.txt").read_text() == "ok"

    def broken(out: Path) -> None:
        (out / "half").write_text("x")
        raise RuntimeError("disk full")

    other = tmp_path / "other-v1"
    with pytest.raises(RuntimeError, match="disk full"):
        build_once(other, broken)
    assert not other.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing half-built is left
    assert build_once(other, lambda out: (out / "x").write_text("1")) == other


def test_resolve_model(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VBENCH_ASYNC_HOME", str(home))
    assert resolve_model("tiny-qwen3-vl") == model_dir("tiny-qwen3-vl", home)
    assert resolve_model(str(tmp_path)) == tmp_path
    assert resolve_model("Qwen/Qwen2.5-VL-7B-Instruct") == "Qwen/Qwen2.5-VL-7B-Instruct"
    with pytest.raises(UserError, match="tiny-qwen2-vl, tiny-qwen2.5-vl, tiny-qwen3-vl"):
        resolve_model("tiny-qwen9-vl")
    with pytest.raises(UserError, match="does not exist"):
        resolve_model(str(tmp_path / "missing-model"))
    with pytest.raises(UserError, match="does not exist"):
        resolve_model("./models/missing")
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(UserError, match="is a file"):
        resolve_model(str(tmp_path / "weights.bin"))


def test_build_once_never_publishes_a_build_that_skipped_its_files(tmp_path: Path) -> None:
    target = tmp_path / "model-v1"
    with pytest.raises(IncompleteBuild, match="config.json"):  # a writer that silently wrote nothing
        build_once(target, lambda out: (out / "meta.json").write_text("{}"), required=("config.json", "*.json"))
    assert not target.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert build_once(target, lambda out: (out / "config.json").write_text("{}"), required=("config.json",)) == target


def test_a_rank_other_than_0_builds_a_complete_tiny_model_inside_a_process_group(tmp_path: Path) -> None:
    """transformers' save_pretrained writes on global rank 0 only once a process group exists: the rank holding
    the build lock used to publish a directory without config.json or weights."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    env.update(VBENCH_ASYNC_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(REPO / "tests" / "support" / "tiny_build_rank.py"), "tiny-qwen2.5-vl"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["rank"]: r for r in map(json.loads, [l for l in proc.stdout.splitlines() if l.startswith("{")])}
    assert rows[1]["error"] is None
    assert {"config.json", "model.safetensors", "processor_config.json"} <= set(rows[0]["files"])
