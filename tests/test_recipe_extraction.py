"""A recipe fixes the answer extraction too (issue 39): `qwen3-vl` reads Video-MME as the Qwen3-VL script does
(`videomme_qwen3vl`), checked against the verdicts of the script's own `can_infer` on a corpus of outputs
(tests/fixtures/recipes/extraction-qwen3-vl-videomme.jsonl, README there); a run under the recipe scores with it,
a run without it with the card's protocol, and re-scoring a run's lines uses the recipe its config records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import test_leaderboard_runs
from conftest import REPO
from test_leaderboard_runs import make_run

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.recipes import RECIPES, RecipePart
from vbench_async.benchmarks.registry import recorded_benchmark, run_scorer
from vbench_async.cli import build_parser
from vbench_async.cli.run_options import config_from_args
from vbench_async.errors import UserError
from vbench_async.evaluation.execute import _scorer
from vbench_async.evaluation.judge_pass import JudgeConfig, judge_run_dir
from vbench_async.evaluation.run_config import recipe_of
from vbench_async.results import summaries
from vbench_async.results.manifest_record import read_manifest_file
from vbench_async.results.result_file import read_results
from vbench_async.samples import Sample, parse_record
from vbench_async.scoring import score

GOLDENS = [json.loads(line) for line in
           (REPO / "tests/fixtures/recipes/extraction-qwen3-vl-videomme.jsonl").read_text("utf-8").splitlines()]
QWEN = "videomme_qwen3vl"


def _sample(g: dict[str, Any]) -> Sample:
    rec = {"problem_id": g["id"], "problem": "q", "problem_type": "multiple choice", "options": g["options"],
           "solution": f"<answer>{g['answer']}</answer>", "path": "v.mp4"}
    return parse_record(rec, "videomme", g["id"])


def test_the_corpus_holds_every_outcome_of_the_rule() -> None:
    """Letters read, the rule's own "Z", and the judge's share: else agreeing on it would prove little."""
    kinds = Counter("judge" if g["verdict"] is None else "Z" if g["verdict"] == "Z" else "letter" for g in GOLDENS)
    assert len(GOLDENS) >= 60 and kinds["letter"] >= 30 and kinds["judge"] >= 10 and kinds["Z"] >= 2
    assert {g["hit"] for g in GOLDENS if g["verdict"] not in (None, "Z")} == {0, 1}


@pytest.mark.parametrize("golden", GOLDENS, ids=[f"{g['id']}-{g['case']}" for g in GOLDENS])
def test_the_protocol_reads_what_the_scripts_can_infer_reads(golden: dict[str, Any]) -> None:
    official = score(_sample(golden), golden["output"], protocol=QWEN).official
    assert official is not None
    if golden["verdict"] is None:  # the script asks its GPT judge: never a silent 0
        assert official.needs_judge and official.value is None
    else:
        assert not official.needs_judge and official.extracted == golden["verdict"]
        assert official.value == golden["hit"]


def test_the_corpus_tells_the_two_protocols_apart() -> None:
    """On these outputs the card's reading (lmms-eval's) differs from the script's: the recipe's choice matters."""
    differ = [g["id"] for g in GOLDENS
              if score(_sample(g), g["output"], protocol=QWEN).official != score(_sample(g), g["output"],
                                                                                 protocol="videomme").official]
    assert len(differ) >= 10


def test_the_recipe_names_the_protocol_for_videomme_only() -> None:
    qwen = RECIPES["qwen3-vl"]
    assert qwen.version == 2 and qwen.protocol("videomme") == QWEN == qwen.protocol("videomme@64f")
    assert qwen.protocol("mvbench") is None and RECIPES["lmms-eval"].protocol("videomme") is None
    with pytest.raises(ValueError, match="unknown official protocol"):
        RecipePart(official_protocol="no-such-protocol")


def _cfg(*flags: str) -> Any:
    args = build_parser().parse_args(["run", "--model", "tiny-qwen3-vl", "--benchmarks", "videomme", *flags])
    return config_from_args(args, local=False)


@pytest.mark.parametrize(("flags", "protocol"), [(("--recipe", "qwen3-vl"), QWEN), ((), "videomme"),
                                                 (("--recipe", "lmms-eval"), "videomme")],
                         ids=["qwen3-vl", "cards", "lmms-eval"])
def test_a_run_scores_with_its_recipes_protocol(flags: tuple[str, ...], protocol: str) -> None:
    """The run's benchmark and the run's scorer (what the pipeline calls) agree on the protocol."""
    cfg = _cfg(*flags)
    bench = get_benchmark("videomme")
    bench.use_recipe(recipe_of(cfg), cfg.prompt.prompt_variant)  # as runner._load does
    assert bench.protocol == protocol
    g = next(g for g in GOLDENS if g["verdict"] is None and g["output"] == "c")  # the script's judge; lmms-eval: 0
    got = _scorer(cfg)(_sample(g), g["output"])
    assert got.details["protocol"] == protocol and got.official == bench.score(_sample(g), g["output"]).official
    assert got.official is not None and got.official.needs_judge == (protocol == QWEN)


def _outputs(sample: Sample, i: int) -> str:
    return str(GOLDENS[int(sample.sample_id)]["output"])


def test_rescoring_reads_a_runs_lines_with_the_recipe_it_ran_under(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run's lines are scored as the runner scores them (`run_scorer` of its recipe); the benchmark rebuilt
    from the run's recorded config reads every line again exactly as stored."""
    samples = [_sample(g) for g in GOLDENS]
    runs = {}
    for recipe in ("qwen3-vl", None):
        monkeypatch.setattr(test_leaderboard_runs, "score", run_scorer(recipe))
        runs[recipe] = make_run(tmp_path / (recipe or "cards"), "m", _outputs, benchmarks=("videomme",),
                                samples={"videomme": samples}, recipe=recipe)
    by_id = {s.sample_id: s for s in samples}
    for recipe, run in runs.items():
        entry = read_manifest_file(run / "manifest.json").benchmarks["videomme"]
        recipe = entry.config.recipe if entry.config is not None else None
        bench = recorded_benchmark("videomme", recipe.name, recipe.version) if recipe else recorded_benchmark(
            "videomme", None)
        assert bench.protocol == (QWEN if recipe else "videomme")
        lines = list(read_results(run / str(entry.results_file)).values())
        assert len(lines) == len(GOLDENS)
        assert sum(bool((r.official or {}).get("needs_judge")) for r in lines) == (
            sum(g["verdict"] is None for g in GOLDENS) if recipe else 0)
        for r in lines:
            assert bench.score(by_id[r.sample_id], r.output or "").official.to_dict() == r.official

    seen: list[str | None] = []  # the judge pass's re-aggregation takes the benchmark the same way
    real = summaries.streamed_aggregate
    monkeypatch.setattr(summaries, "streamed_aggregate", lambda run_dir, bench, *a, **k: (
        seen.append(bench.protocol), real(run_dir, bench, *a, **k))[1])
    for run in runs.values():
        summaries.recompute_summary(run)
    assert seen == [QWEN, "videomme"]


def test_a_recipe_this_version_does_not_hold_is_refused(tmp_path: Path) -> None:
    """Its lines were read by another extraction: re-scoring, and a judge pass before it judges anything, refuse."""
    current = RECIPES["qwen3-vl"].identity
    assert recorded_benchmark("videomme", current["name"], current["version"]).protocol == QWEN
    for name, version in ((current["name"], 1), ("gone", 1), (current["name"], None)):
        with pytest.raises(UserError, match="re-score them with the version that made them"):
            recorded_benchmark("videomme", name, version)
    run = make_run(tmp_path / "old", "m", _outputs, benchmarks=("videomme",),
                   samples={"videomme": [_sample(g) for g in GOLDENS if g["verdict"] is None][:3]},
                   recipe="qwen3-vl")  # items the judge would be asked about
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["benchmarks"]["videomme"]["config"]["recipe"]["version"] = 1  # as a qwen3-vl v1 run recorded it
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="qwen3-vl v2"):
        summaries.recompute_summary(run)
    def files() -> list[Path]:  # the run directory's lock file aside
        return sorted(p for p in run.rglob("*") if p.name != ".run.lock")

    before = files()
    with pytest.raises(UserError, match="qwen3-vl v2"):
        judge_run_dir(run, JudgeConfig(model="no-such-judge", backend="openai"))
    assert files() == before  # refused before any judge was asked: no verdict file
