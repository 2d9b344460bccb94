"""Every prompt golden in tests/fixtures/recipes/ (the makers' own prompt builders run on real records, outside the
project) against the project's rendering of the same record under that recipe, byte for byte. Reads the unified
records from ../shared/reference-annotations (skipped without it); the recipe's system prompt is checked too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import shared_dir

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.recipes import RECIPES
from vbench_async.samples import Sample

FIXTURES = Path(__file__).parent / "fixtures" / "recipes"
GOLDEN_FILES = sorted(FIXTURES.glob("prompts-*.jsonl"))
# "<tool>@<model class>" goldens: what that tool sends a model with no entry of its own (the official prompt)
NO_RECIPE = {"lmms-eval@vllm"}
CARD_OF_FILE = {"mlvu-dev.json": "mlvu@dev"}  # annotation files a preset reads, not the card's own


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_every_golden_names_a_recipe_or_a_known_tool_default():
    recipes = {row["recipe"] for path in GOLDEN_FILES for row in _rows(path)}
    assert recipes <= set(RECIPES) | NO_RECIPE and {"qwen3-vl", "lmms-eval"} <= recipes
    assert len(GOLDEN_FILES) >= 12 and all(len(_rows(p)) == 5 for p in GOLDEN_FILES)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_the_project_renders_each_makers_prompt_byte_for_byte(path):
    root = shared_dir("reference-annotations")
    rows = _rows(path)
    card = CARD_OF_FILE.get(rows[0]["annotation_file"], rows[0]["benchmark"])
    bench = get_benchmark(card)
    recipe = RECIPES.get(rows[0]["recipe"])
    if recipe is not None:
        bench.use_recipe(recipe, None)
    samples = {s.sample_id: s for s in bench.load_samples(root) if isinstance(s, Sample)}
    for row in rows:
        assert bench.render_prompt(samples[str(row["record_id"])]) == row["prompt"], (path.name, row["record_id"])
        if recipe is not None:
            assert recipe.system_prompt == row["system_prompt"]
