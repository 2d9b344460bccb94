"""The seeing models (`seeing-qwen2.5-vl`, `seeing-qwen3-vl`) on the seeing suite: weights trained on CPU to answer
from the pixels (vbench_async/train/seeing.py), so a change that loses the frames, their order or the path they take
to the model makes these tests fail, where the random-weight tiny models score 0 either way.

Each family runs through the in-process vLLM engine with the real, blank and reversed frames (one engine); the
transformers backend and vLLM's OpenAI server each run the real frames of one family. Bounds: the seeing suite has
48 questions a benchmark, balanced answers, so a constant answer scores exactly the chance shown (25, 33.3, 50, 50)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SERVER_GROUP, run_cli, serve

BENCHMARKS = ("seeing-color", "seeing-count", "seeing-size", "seeing-when")
CONSTANT = {"seeing-color": 0.25, "seeing-count": 1 / 3, "seeing-size": 0.5, "seeing-when": 0.5}
# What the committed weights must keep scoring with the real frames: each a few questions below what they scored
# when committed (docs/seeing-models.md) and above a constant answer by 8 (of 48) questions or more.
SEEING = {"seeing-qwen2.5-vl": {"seeing-color": 0.85, "seeing-count": 0.5, "seeing-size": 0.75, "seeing-when": 0.7},
          "seeing-qwen3-vl": {"seeing-color": 0.85, "seeing-count": 0.5, "seeing-size": 0.75, "seeing-when": 0.85}}
# The module's engine runs stay on one worker (the fixture runs once), not on the demo runs' ("engine")
SEEING_GROUP = pytest.mark.xdist_group("seeing")
ARGS = ("--suite", "seeing", "--max-tokens", "4", "--no-progress", "--workers", "1", "--no-site")


def scores(run_dir: Path) -> dict[str, float]:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"], summary
    return {b: summary["benchmarks"][b]["score"] for b in BENCHMARKS}


def assert_sees(model: str, got: dict[str, float], where: str) -> None:
    low = {b: round(got[b], 3) for b in BENCHMARKS if got[b] < SEEING[model][b]}
    assert not low, f"{model}, {where}: below what it scores with its frames {SEEING[model]}: {low}"


@pytest.fixture(scope="module", params=["seeing-qwen2.5-vl", "seeing-qwen3-vl"])
def ablated(request, tmp_path_factory) -> dict[str, Any]:
    """{input: scores} of one seeing model on the in-process vLLM engine: real, blank and reversed frames."""
    out = tmp_path_factory.mktemp(request.param) / "run"
    proc = run_cli("run", "--model", request.param, "--ablation", "none,blank,reverse", "--output-dir", str(out),
                   *ARGS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"model": request.param, "frames": scores(out), "blank": scores(out / "ablation-blank"),
            "reverse": scores(out / "ablation-reverse"), "console": proc.stdout, "dir": out}


@SEEING_GROUP
@pytest.mark.vllm
def test_the_seeing_model_answers_from_the_frames_and_falls_to_chance_without_them(ablated):
    assert_sees(ablated["model"], ablated["frames"], "real frames")
    # Blank frames carry no answer: each benchmark at most a few questions above a constant answer's score
    high = {b: round(s, 3) for b, s in ablated["blank"].items() if s > CONSTANT[b] + 0.1}
    assert not high, f"blank frames scored above chance: {high}"
    table = ablated["console"][ablated["console"].index("scores by input"):].splitlines()
    assert table[1].split() == ["benchmark", "chance", "frames", "blank", "reverse"]


@SEEING_GROUP
@pytest.mark.vllm
def test_each_ablation_is_a_run_of_its_own_whose_lines_say_what_the_model_got(ablated):
    runs = {"none": ablated["dir"], "blank": ablated["dir"] / "ablation-blank",
            "reverse": ablated["dir"] / "ablation-reverse"}
    lines = {a: [json.loads(x) for p in sorted((d / "results").glob("*.jsonl")) for x in p.read_text().splitlines()]
             for a, d in runs.items()}
    assert {len(v) for v in lines.values()} == {4 * 48}
    assert all("ablation" not in r["frames"] for r in lines["none"])  # a real run's lines are as they were
    for a in ("blank", "reverse"):
        assert {r["frames"]["ablation"] for r in lines[a]} == {a}
        assert json.loads((runs[a] / "manifest.json").read_text())["run_config"]["ablation"] == a
    assert len({v[0]["config_hash"] for v in lines.values()}) == 3  # the ablation is in the hash: never one file


@SEEING_GROUP
@pytest.mark.vllm
def test_reversed_frames_flip_when_the_shapes_are_shown_and_keep_what_they_look_like(ablated):
    bounds = SEEING[ablated["model"]]
    assert ablated["reverse"]["seeing-when"] <= 1 - bounds["seeing-when"], ablated["reverse"]
    assert ablated["reverse"]["seeing-color"] >= bounds["seeing-color"], ablated["reverse"]  # one frame's colour


@pytest.mark.vllm
def test_the_transformers_backend_sees_too(tmp_path):
    out = tmp_path / "run"
    proc = run_cli("run", "--model", "seeing-qwen3-vl", "--backend", "hf", "--output-dir", str(out), *ARGS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_sees("seeing-qwen3-vl", scores(out), "--backend hf")


@SERVER_GROUP
@pytest.mark.vllm
def test_vllms_openai_server_gets_the_frames_in_its_payload(tmp_path):
    from vbench_async.demo.tiny_models import ensure_tiny_model

    with serve(ensure_tiny_model("seeing-qwen2.5-vl"), name="seeing") as url:
        out = tmp_path / "run"
        proc = run_cli("run", "--model", "seeing-qwen2.5-vl", "--backend", "openai", "--base-url", url,
                       "--served-model", "seeing", "--output-dir", str(out), *ARGS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_sees("seeing-qwen2.5-vl", scores(out), "--backend openai")


@pytest.mark.slow  # about 10 minutes of training on one core, then one evaluation
def test_the_recipe_rebuilds_a_model_that_sees(tmp_path):
    """scripts/train_seeing_model.py with the recipe recorded beside the committed Qwen3-VL weights trains a model
    that passes the same bounds (its bytes may differ on another CPU; its scores must not fall)."""
    import shutil
    import subprocess
    import sys

    from vbench_async.demo.tiny_models import ensure_tiny_model, seeing_weights

    recipe = json.loads(seeing_weights("seeing-qwen3-vl").with_suffix(".json").read_text())["recipe"]
    weights = tmp_path / "rebuilt.safetensors"
    flags = [f"--{'' if v else 'no-'}{k.replace('_', '-')}" if isinstance(v, bool) else f"--{k.replace('_', '-')}={v}"
             for k, v in recipe.items() if k != "base"]
    subprocess.run([sys.executable, "scripts/train_seeing_model.py", recipe["base"], "--out", str(weights),
                    "--work", str(tmp_path / "work"), *flags], check=True, cwd=Path(__file__).resolve().parents[1])
    model = tmp_path / "model"
    shutil.copytree(ensure_tiny_model(recipe["base"]), model)
    shutil.copyfile(weights, model / "model.safetensors")
    out = tmp_path / "run"
    proc = run_cli("run", "--model", str(model), "--output-dir", str(out), *ARGS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_sees("seeing-qwen3-vl", scores(out), "rebuilt by the recipe")
