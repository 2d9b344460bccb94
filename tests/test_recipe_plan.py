"""`plan` under a recipe (issue 39): the frames and prompt tokens the project plans for Video-MME records under
`--recipe qwen3-vl` equal what the Qwen3-VL repository's Video-MME pipeline (qwen-vl-utils, the chat template, the
video processor's second resize, the processor's placeholder expansion) gives for the same records and videos, and
`plan --compare-recipes` shows what each recipe costs. The goldens were made outside the project
(tests/fixtures/recipes/README.md, prompt-tokens-qwen3-vl-videomme.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from support.videos import write_video

from vbench_async import models
from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.recipes import RECIPES
from vbench_async.benchmarks.selection import Selection
from vbench_async.evaluation.runner import RunConfig, plan
from vbench_async.workload.plan import video_geometry
from vbench_async.workload.probe import probe_video

FIXTURES = Path(__file__).parent / "fixtures" / "recipes"
GOLDEN = json.loads((FIXTURES / "prompt-tokens-qwen3-vl-videomme.json").read_text())
PROMPTS = {g["record_id"]: g for g in map(json.loads, (FIXTURES / "prompts-qwen3-vl-videomme.jsonl").read_text()
                                          .splitlines())}


def _video(root: Path, name: str) -> Path:
    return root / "Video-MME" / "videos" / f"{name}.mp4"


@pytest.fixture(scope="module")
def videomme_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Video-MME data root (the unified annotation form) with the golden's records and videos."""
    root = tmp_path_factory.mktemp("videomme")
    for name, kwargs in GOLDEN["videos"].items():
        write_video(_video(root, name), **kwargs)
    records = [{"problem_id": r["record_id"], "problem": PROMPTS[r["record_id"]]["maker_input"]["question"],
                "options": PROMPTS[r["record_id"]]["maker_input"]["options"], "solution": "<answer>A</answer>",
                "problem_type": "multiple choice", "data_type": "video", "path": f"./videos/{r['video']}.mp4",
                "question_id": r["question_id"], "duration": "short"} for r in GOLDEN["records"]]
    (root / "videomme.json").write_text(json.dumps(records))
    return root


def test_the_golden_is_made_with_the_recipes_settings() -> None:
    """The fixture's video entry and second resize are the recipe's: a recipe change must come with new goldens."""
    bench = get_benchmark("videomme")
    bench.use_recipe(RECIPES["qwen3-vl"], "official")
    spec = bench.frame_spec(models.resolve("tiny-qwen3-vl"))
    entry = GOLDEN["video_entry"]
    assert (spec.fps, spec.min_frames, spec.max_frames, spec.min_pixels, spec.max_pixels, spec.total_pixels) == (
        entry["fps"], entry["min_frames"], entry["max_frames"], entry["min_pixels"], entry["max_pixels"],
        entry["total_pixels"])
    assert spec.second_resize_max_pixels == GOLDEN["second_resize"]["size.longest_edge"]
    assert {r["record_id"] for r in GOLDEN["records"]} == set(PROMPTS)


def test_plan_under_the_qwen3_vl_recipe_gives_the_scripts_frames_and_prompt_tokens(videomme_root: Path,
                                                                                   tmp_path: Path) -> None:
    workload = plan(RunConfig(model="tiny-qwen3-vl", recipe="qwen3-vl", cache_dir=tmp_path / "cache",
                              selection=Selection(benchmarks=("videomme",), data_root=videomme_root)))
    bench = get_benchmark("videomme")
    bench.use_recipe(RECIPES["qwen3-vl"], "official")
    spec = bench.frame_spec(models.resolve("tiny-qwen3-vl"))  # as the plan resolves it
    for r in GOLDEN["records"]:
        where = f"record {r['record_id']} ({r['video']})"
        header = probe_video(_video(videomme_root, r["video"]))
        geometry = video_geometry(header, spec, None)  # the plan's own geometry of this video
        first, seen = r["qwen_vl_utils"], r["model_input"]
        assert (geometry.frames, geometry.height, geometry.width) == (seen["frames"], seen["height"],
                                                                     seen["width"]), where
        assert spec.resize_steps(header.height, header.width, geometry.frames)[0] == (first["height"],
                                                                                   first["width"]), where
        assert (geometry.indices[0], geometry.indices[-1]) == (first["first_index"], first["last_index"]), where
        assert geometry.fps == pytest.approx(first["fps"]), where  # the timestamps in the prompt come from it
        assert workload.prompt_tokens[f"videomme/{r['record_id']}"] == r["prompt_tokens"], where
    b = workload.benchmarks[0]
    assert b.frames is not None and b.visual_tokens is not None
    frames = [r["model_input"]["frames"] for r in GOLDEN["records"]]
    visual = [r["video_tokens"] for r in GOLDEN["records"]]
    assert (b.n_planned, b.frames.min, b.frames.max) == (5, min(frames), max(frames))
    assert (b.visual_tokens.min, b.visual_tokens.max) == (min(visual), max(visual))


def test_plan_compares_recipes_row_by_row(videomme_root: Path, tmp_path: Path) -> None:
    common = ("plan", "--model", "tiny-qwen3-vl", "--benchmarks", "videomme", "--data-root", str(videomme_root),
              "--cache-dir", str(tmp_path / "cache"), "--compare-recipes", "none,qwen3-vl,lmms-eval")
    proc = run_cli(*common, "--json")
    # qwen3-vl's 32,768 answer tokens overflow the tiny model's 32,768 positions: the plan says so (exit 1).
    assert proc.returncode == 1, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    rows = {r["recipe"]: r for r in out["rows"]}
    assert list(rows) == ["none", "qwen3-vl", "lmms-eval"] and {r["benchmark"] for r in rows.values()} == {"videomme"}
    qwen, lmms, card = rows["qwen3-vl"], rows["lmms-eval"], rows["none"]
    # lmms-eval takes exactly 32 frames of every video; qwen3-vl fps 2 up to 512, the card fps 2 up to 256.
    assert lmms["frames"]["min"] == lmms["frames"]["max"] == 32
    assert qwen["frames"]["max"] == 512 > card["frames"]["max"] == 256 > lmms["frames"]["max"]
    assert qwen["frames"]["min"] == card["frames"]["min"] == 16 < lmms["frames"]["min"]
    # The second resize holds qwen3-vl's longest video under the card's tokens, although it takes twice the frames.
    assert qwen["visual_tokens"]["max"] == max(r["video_tokens"] for r in GOLDEN["records"])
    assert qwen["visual_tokens"]["max"] < card["visual_tokens"]["max"]
    assert qwen["prompt_tokens"]["max"] == max(r["prompt_tokens"] for r in GOLDEN["records"])
    assert (qwen["max_tokens"], lmms["max_tokens"], card["max_tokens"]) == (32768, 16, 256)
    for r in rows.values():
        assert r["largest_context"] == r["prompt_tokens"]["max"] + r["max_tokens"]
        engine = out["recipes"][r["recipe"]]["engine"]
        assert r["kv_bytes_per_sequence"] == r["largest_context"] * engine["kv_bytes_per_token"]
        assert r["kv_bytes_at_concurrency"] == r["kv_bytes_per_sequence"] * engine["concurrency"] > 0
    assert qwen["kv_bytes_per_sequence"] > card["kv_bytes_per_sequence"] > lmms["kv_bytes_per_sequence"]
    assert (qwen["fits"], lmms["fits"], card["fits"]) == (False, True, True)
    table = run_cli(*common).stdout
    lines = {line.split()[0]: line for line in table.splitlines() if line.split()[:2][-1:] == ["videomme"]}
    assert set(lines) == {"none", "qwen3-vl", "lmms-eval"} and "KV per sequence" in table
    assert " 32/32/32 " in lines["lmms-eval"] and " 16/80/512 " in lines["qwen3-vl"]


def test_compare_recipes_is_in_plan_help_and_checks_its_names() -> None:
    help_text = " ".join(run_cli("plan", "--help", check=True).stdout.split())
    assert "--compare-recipes NAME,NAME" in help_text and "one row per recipe and benchmark" in help_text
    proc = run_cli("plan", "--model", "tiny-qwen3-vl", "--benchmarks", "videomme", "--compare-recipes", "qwen3,none")
    assert proc.returncode == 2 and "unknown recipe(s) qwen3" in proc.stderr
    both = run_cli("plan", "--model", "tiny-qwen3-vl", "--benchmarks", "videomme", "--recipe", "qwen3-vl",
                   "--compare-recipes", "lmms-eval")
    assert both.returncode != 0 and "not both" in both.stderr + both.stdout
