"""A model that sees: the seeing models (tiny checkpoints trained on the synthetic generator, shipped with the package)
answer the demo's questions from the pixels, through every backend and the trainer's data path, and each part of
the input is guarded: blank frames fall to chance, reversed frames flip the answers about the direction of motion.

These tests fail when a change anywhere drops the pixels (request building, the cache, the processor call, the
server payload, the trainer's forward) or their order; a random-weight model could not tell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ENGINE_GROUP, SERVER_GROUP, run_cli, serve, served_args

pytestmark = pytest.mark.vllm

BENCHMARKS = "demo-mc,demo-yesno,demo-count"
ARGS = ("--benchmarks", BENCHMARKS, "--max-tokens", "8", "--no-progress", "--workers", "1", "--no-site")
# Chance on the demo: one in four options, one in two for yes/no; a count has no chance level (guessing scores ~0).
CHANCE = {"demo-mc": 0.25, "demo-yesno": 0.5, "demo-count": 0.0}
# What the seeing models reach on the demo (measured: docs/seeing-models.md) is well above these floors.
FLOOR = {"demo-mc": 0.6, "demo-yesno": 0.75, "demo-count": 0.35}


def scores(run_dir: Path) -> dict[str, float]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {b: summary["benchmarks"][b]["score"] for b in BENCHMARKS.split(",")}


def motion(run_dir: Path) -> tuple[float, int]:
    """(accuracy, count) of the questions about the direction of motion: they need the frames in their order."""
    values = []
    for path in (run_dir / "results").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["fields"].get("category") == "motion":
                values.append(float(r["score"] or 0.0))
    return sum(values) / len(values), len(values)


def assert_sees(run_dir: Path) -> None:
    got = scores(run_dir)
    low = {b: s for b, s in got.items() if s < FLOOR[b]}
    assert not low, f"the seeing model scored {got} (floors {FLOOR}): are the pixels reaching it?"


def assert_blind(run_dir: Path, seeing: Path) -> None:
    """Blank frames: every benchmark far below the real frames' score, and near chance."""
    got, real = scores(run_dir), scores(seeing)
    for b, s in got.items():
        assert s <= CHANCE[b] + 0.3 and s < real[b] - 0.2, f"{b}: {s} with blank frames, {real[b]} with frames"


@pytest.fixture(scope="module")
def qwen25_ablations(tmp_path_factory):
    """seeing-qwen2.5-vl on the in-process vLLM engine: real frames, blank, reversed (one engine, one command)."""
    out = tmp_path_factory.mktemp("seeing25") / "run"
    proc = run_cli("run", "--model", "seeing-qwen2.5-vl", *ARGS, "--ablation", "none,blank,reverse",
                   "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out, proc


@ENGINE_GROUP
def test_the_seeing_model_answers_from_the_pixels_on_vllm(qwen25_ablations):
    out, proc = qwen25_ablations
    assert_sees(out)
    acc, n = motion(out)
    assert n >= 4 and acc >= 0.7, f"motion questions: {acc:.2f} of {n}"
    assert "scores by input" in proc.stdout and "blank" in proc.stdout  # the side-by-side table


@ENGINE_GROUP
def test_blank_frames_fall_to_chance(qwen25_ablations):
    out, _ = qwen25_ablations
    assert_blind(out / "ablation-blank", out)
    lines = [json.loads(l) for p in (out / "ablation-blank" / "results").glob("*.jsonl")
             for l in p.read_text().splitlines()]
    assert lines and all(l["frames"]["ablation"] == "blank" for l in lines)  # each line says what the model got


@ENGINE_GROUP
def test_reversed_frames_flip_the_direction_of_motion(qwen25_ablations):
    out, _ = qwen25_ablations
    real, _ = motion(out)
    reversed_, n = motion(out / "ablation-reverse")
    assert reversed_ <= 0.4 and reversed_ < real - 0.3, f"motion: {real:.2f} forward, {reversed_:.2f} reversed ({n})"


@ENGINE_GROUP
def test_the_qwen3_seeing_model_answers_from_the_pixels_on_vllm(tmp_path):
    out = tmp_path / "run"
    proc = run_cli("run", "--model", "seeing-qwen3-vl", *ARGS, "--ablation", "none,blank", "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert_sees(out)
    assert_blind(out / "ablation-blank", out)


def test_the_seeing_model_answers_from_the_pixels_through_transformers(tmp_path):
    """`--backend hf`: the processor call with the family's hand-off kwargs, generate on the HF model."""
    out = tmp_path / "run"
    proc = run_cli("run", "--model", "seeing-qwen2.5-vl", "--backend", "hf", *ARGS, "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert_sees(out)


@SERVER_GROUP
def test_the_seeing_model_answers_from_the_pixels_through_the_openai_server(tmp_path):
    """`--backend openai`: the frames travel in the request payload to vLLM's server, with their metadata."""
    from vbench_async.demo.seeing_models import ensure_seeing_model

    with serve(ensure_seeing_model("seeing-qwen2.5-vl")) as url:
        out = tmp_path / "run"
        proc = run_cli("run", "--model", "seeing-qwen2.5-vl", *served_args(url), *ARGS, "--ablation", "none,blank",
                       "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert_sees(out)
    assert_blind(out / "ablation-blank", out)
