"""Issue 39: the official headlines of MVBench, MLVU, Video-MMMU and TempCompass on data that carries the field they
need (the hub source's task, task type, track, format), against the official aggregation code's numbers for the same
synthetic output set (tests/fixtures/parity/official_aggregations.json: lmms-eval's aggregation functions run in a
scratch environment; only their numbers are committed). Where a second number differs, it is beside the headline,
labelled; where the records lack the field, the headline says so (`headline_basis`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.quirks import videommmu_track
from vbench_async.results.readings import reading_lines
from vbench_async.samples import parse_record

FIXTURE = json.loads((Path(__file__).resolve().parent / "fixtures" / "parity" / "official_aggregations.json")
                     .read_text(encoding="utf-8"))
REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference-annotations"


def lines(items: list[dict], task_type: str = "multiple choice") -> list[dict]:
    """Result lines as a run writes them, with the official reading the per-sample score; an empty prediction is
    marked dropped as the official reading marks it."""
    out = []
    for it in items:
        official = {"value": it["value"], "extracted": None, "guessed": False, "needs_judge": False}
        if it["dropped"]:
            official["dropped"] = True
        out.append({"sample_id": it["id"], "score": it["value"], "error": None, "task_type": task_type,
                    "fields": it["fields"], "official": official,
                    "robust": {"value": it["value"], "extracted": None, "guessed": False, "needs_judge": False}})
    return out


def official_aggregate(benchmark: str, items: list[dict]) -> dict:
    return get_benchmark(benchmark).aggregate(reading_lines(lines(items), "official"))


def test_mvbench_headline_is_the_mean_of_the_20_task_accuracies() -> None:
    case = FIXTURE["mvbench"]
    agg = official_aggregate("mvbench", case["items"])
    golden = case["official"]
    assert len(golden["by_task_percent"]) == 20 and "headline_basis" not in agg
    assert math.isclose(100 * agg["score"], golden["mean_of_task_accuracies_percent"], abs_tol=1e-9)
    assert agg["by_task"].keys() == golden["by_task_percent"].keys()
    for task, pct in golden["by_task_percent"].items():
        assert math.isclose(100 * agg["by_task"][task], pct, abs_tol=1e-9), task
    pooled = agg["also_reported"]["mean_over_samples"]  # the number reported before, beside and labelled
    answered = [it for it in case["items"] if not it["dropped"]]
    assert math.isclose(pooled["score"], sum(it["value"] for it in answered) / len(answered), abs_tol=1e-12)
    assert not math.isclose(pooled["score"], agg["score"]) and "pooled" in pooled["definition"]
    assert agg["n_dropped"] == sum(it["dropped"] for it in case["items"])


@pytest.mark.parametrize("split", ["test", "dev"])
def test_mlvu_headline_is_m_avg_over_the_task_types(split: str) -> None:
    case = FIXTURE[f"mlvu_{split}"]
    agg = official_aggregate("mlvu", case["items"])
    assert math.isclose(100 * agg["score"], case["official"]["m_avg_percent"], abs_tol=1e-9)
    assert "headline_basis" not in agg and agg["headline"].startswith("unweighted mean over")
    assert "mean_over_samples" in agg["also_reported"]


def test_videommmu_reports_the_official_per_track_accuracies_beside_a_labelled_pooled_headline() -> None:
    case = FIXTURE["videommmu"]
    agg = official_aggregate("videommmu", case["items"])
    golden = case["official"]["by_track_fraction_rounded_5"]  # lmms-eval rounds each track's accuracy to 5 places
    assert agg["official_by_track"].keys() == golden.keys()
    for track, acc in golden.items():
        assert round(agg["official_by_track"][track]["score"], 5) == acc, track
    kept = [it for it in case["items"] if not it["dropped"]]
    assert math.isclose(agg["score"], sum(it["value"] for it in kept) / len(kept), abs_tol=1e-12)
    assert "pooled" in agg["headline"] and "official_by_track" in agg["headline"]
    assert math.isclose(agg["also_reported"]["mean_of_track_scores"]["score"],
                        sum(g["score"] for g in agg["official_by_track"].values()) / 3, abs_tol=1e-12)
    assert "unavailable_breakdowns" not in agg


def test_tempcompass_reports_the_official_per_format_accuracies() -> None:
    case = FIXTURE["tempcompass"]
    agg = official_aggregate("tempcompass", case["items"])
    golden = case["official"]
    for fmt, pct in golden["by_format_percent"].items():
        assert math.isclose(100 * agg["official_by_format"][fmt]["score"], pct, abs_tol=1e-9), fmt
    assert agg["official_by_format"].keys() == golden["by_format_percent"].keys()
    # the per-dimension accuracies inside one format, as each lmms-eval format task reports <dim>_accuracy
    for fmt, dims in golden["by_format_dim_percent"].items():
        sub = official_aggregate("tempcompass", [it for it in case["items"] if it["fields"]["format"] == fmt])
        for dim, pct in dims.items():
            assert math.isclose(100 * sub["by_dim"][dim]["score"], pct, abs_tol=1e-9), (fmt, dim)
    assert "pooled" in agg["headline"] and "mean_of_format_scores" in agg["also_reported"]


def test_a_format_waiting_for_the_judge_has_no_official_number_yet() -> None:
    items = FIXTURE["tempcompass"]["items"]
    raw = lines(items)
    for line in raw:
        if line["fields"]["format"] == "captioning":
            line["official"] = {"value": None, "extracted": None, "guessed": False, "needs_judge": True}
            break
    agg = get_benchmark("tempcompass").aggregate(reading_lines(raw, "official"))
    assert agg["score"] is None and agg["headline_status"] == "needs judge"
    caption = agg["official_by_format"]["captioning"]
    assert caption["score"] is None and caption["n_needs_judge"] == 1
    assert agg["official_by_format"]["yes_no"]["score"] is not None and "also_reported" not in agg


def test_without_the_field_the_headline_says_what_it_reports_instead() -> None:
    items = [{**it, "fields": {}} for it in FIXTURE["mvbench"]["items"]]
    agg = official_aggregate("mvbench", items)
    assert agg["headline_basis"]["reported"] == "mean over all samples" and "also_reported" not in agg
    agg = official_aggregate("videommmu", [{**it, "fields": {}} for it in FIXTURE["videommmu"]["items"]])
    assert "official_by_track" not in agg and "track" in agg["unavailable_breakdowns"]


@pytest.mark.parametrize("problem_id,track", [(1, "Adaptation"), (300, "Adaptation"), (301, "Comprehension"),
                                              (600, "Comprehension"), (601, "Perception"), (900, "Perception")])
def test_videommmu_unified_ids_give_the_track(problem_id: int, track: str) -> None:
    sample = parse_record({"problem_id": problem_id, "problem": "q", "problem_type": "multiple choice",
                           "options": ["A. a", "B. b"], "solution": "<answer>A</answer>", "path": "./x.mp4"},
                          benchmark="videommmu", index=0)
    assert videommmu_track(sample).fields["track"] == track


def test_videommmu_track_is_not_guessed_for_other_ids_and_the_hub_track_stands() -> None:
    base = {"problem": "q", "problem_type": "multiple choice", "options": ["A. a", "B. b"],
            "solution": "<answer>A</answer>", "path": "./x.mp4"}
    for pid in (901, 0, "validation_Biology_3"):
        s = parse_record({**base, "problem_id": pid}, benchmark="videommmu", index=0)
        assert "track" not in videommmu_track(s).fields
    s = parse_record({**base, "problem_id": 5, "track": "Perception"}, benchmark="videommmu", index=0)
    assert videommmu_track(s).fields["track"] == "Perception"


@pytest.mark.skipif(not (REFERENCE / "videommmu_with_image.json").is_file(), reason="no reference annotations")
@pytest.mark.parametrize("name", ["videommmu_with_image.json", "videommmu.json"])
def test_videommmu_reference_records_get_their_track_through_the_card(name: str) -> None:
    """Loaded as a run loads them (the card's quirks): the Adaptation block is exactly the records with the
    question image, and the other two blocks hold one question each for the same videos."""
    from vbench_async.benchmarks.sources import to_samples

    records = json.loads((REFERENCE / name).read_text(encoding="utf-8"))
    samples = to_samples([dict(r) for r in records], get_benchmark("videommmu").card)
    tracks = {s.sample_id: s.fields.get("track") for s in samples}
    assert all(tracks.values())
    with_image = json.loads((REFERENCE / "videommmu_with_image.json").read_text(encoding="utf-8"))
    assert {str(r["problem_id"]) for r in with_image if r.get("image_path")} == \
        {k for k, v in tracks.items() if v == "Adaptation"}
    by_video: dict[str, set] = {}
    for r, s in zip(records, samples):
        by_video.setdefault(r["path"], set()).add(s.fields["track"])
    assert any(v == {"Adaptation", "Comprehension", "Perception"} for v in by_video.values())


def test_the_final_table_shows_the_official_per_group_report_and_the_second_number() -> None:
    import io

    from vbench_async.cli.output import print_table

    buf = io.StringIO()
    print_table({"benchmarks": {"videommmu": official_aggregate("videommmu", FIXTURE["videommmu"]["items"]),
                                "mvbench": official_aggregate("mvbench", FIXTURE["mvbench"]["items"])}}, file=buf)
    text = buf.getvalue()
    golden = FIXTURE["videommmu"]["official"]["by_track_fraction_rounded_5"]
    assert "videommmu: official per track: " in text and f"Perception {100 * golden['Perception']:.2f}" in text
    assert "videommmu: also mean_of_track_scores = " in text and "mvbench: also mean_over_samples = " in text
