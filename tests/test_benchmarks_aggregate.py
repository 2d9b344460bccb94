"""Aggregation kinds on hand-computed results: honest denominators (failures and unscored samples count as 0),
official macro means, and the labelled fallbacks."""

from __future__ import annotations

import math

import pytest

from vbench_async.benchmarks import get_benchmark
from vbench_async.benchmarks.aggregate import aggregate
from vbench_async.benchmarks.cards import Aggregation, Category


def result(score, error=None, task_type="multiple choice", **fields) -> dict:
    return {"sample_id": str(id(fields)), "score": score, "error": error, "task_type": task_type, "fields": fields,
            "details": {}}


FAIL = {"kind": "decode_error", "message": "x"}


def close(a: float, b: float) -> bool:
    return a is not None and math.isclose(a, b, abs_tol=1e-9)


def test_failures_and_unscored_samples_count_as_zero() -> None:
    rows = [result(1.0), result(1.0), result(None, FAIL), result(None)]
    agg = aggregate(rows, Aggregation("micro"), metric="accuracy")
    assert close(agg["score"], 0.5)
    assert (agg["n_total"], agg["n_scored"], agg["n_failed"], agg["n_pending"]) == (4, 2, 1, 1)
    assert agg["metric"] == "accuracy"
    # a failed sample's stale score (e.g. from a retried run) never counts
    assert close(aggregate([result(1.0, FAIL), result(1.0)], Aggregation("micro"))["score"], 0.5)


def test_empty_results_have_no_score() -> None:
    agg = aggregate([], Aggregation("macro", field="task"))
    assert agg["score"] is None and agg["n_total"] == 0


def test_macro_means_groups_and_reports_samples_without_a_group() -> None:
    rows = [result(1.0, task="a"), result(0.0, task="a"), result(1.0, task="b"), result(None, FAIL, task="b"),
            result(1.0)]
    agg = aggregate(rows, Aggregation("macro", field="task"))
    assert close(agg["score"], 0.5) and agg["by_task"] == {"a": 0.5, "b": 0.5}
    assert agg["n_without_group"] == 1
    fallback = aggregate([result(1.0), result(0.0), result(0.0)], Aggregation("macro", field="task"))
    assert close(fallback["score"], 1 / 3) and "no 'task' field" in fallback["headline"]


def test_hierarchical_is_task_then_category_then_overall() -> None:
    rows = [result(1.0, t="A", c="x"), result(1.0, t="A", c="x"), result(0.0, t="B", c="x"),
            result(None, FAIL, t="C", c="y")]
    agg = aggregate(rows, Aggregation("hierarchical", levels=("t", "c")))
    assert agg["by_c"] == {"x": {"score": 0.5, "n_tasks": 2}, "y": {"score": 0.0, "n_tasks": 1}}
    assert close(agg["score"], 0.25)  # not the micro mean 0.5


def test_hierarchical_reports_samples_without_a_group_instead_of_a_none_group() -> None:
    rows = [result(1.0, t="A", c="x"), result(0.0, t="B", c="x"), result(1.0, t="A")]
    agg = aggregate(rows, Aggregation("hierarchical", levels=("t", "c")))
    assert "None" not in agg["by_c"] and "None" not in agg["by_t"]
    assert agg["n_without_group"] == 1 and close(agg["score"], 0.5)
    fallback = aggregate([result(1.0), result(0.0)], Aggregation("hierarchical", levels=("t", "c")))
    assert close(fallback["score"], 0.5) and fallback["headline_basis"]["reported"] == "mean over all samples"


def test_videomathqa_failed_binary_variant_fails_its_question() -> None:
    rows = [result(1.0), result(1.0, mbin_group="q1"), result(None, FAIL, mbin_group="q1"),
            result(1.0, mbin_group="q2"), result(1.0, mbin_group="q2")]
    agg = aggregate(rows, Aggregation("videomathqa", headline="mbin"))
    assert close(agg["score"], 0.5) and agg["mbin"]["n_questions"] == 2
    assert close(agg["mcq"]["score"], 1.0) and close(agg["predecessor_micro"]["score"], 0.8)


def test_temporal_grounding_recall_counts_failures() -> None:
    rows = [result(0.8, task_type="temporal grounding"), result(0.4, task_type="temporal grounding"),
            result(None, FAIL, task_type="temporal grounding"), result(0.6, task_type="temporal grounding")]
    agg = aggregate(rows, Aggregation("temporal_grounding"))
    assert close(agg["mIoU"], 0.45)
    assert (agg["R@0.3"], agg["R@0.5"], agg["R@0.7"]) == (0.75, 0.5, 0.25)


def test_stvg_failed_item_is_zero_on_every_official_metric() -> None:
    gt = '<answer>{"time": [0, 2], "boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10]}}</answer>'
    ok = {**result(1.0, task_type="stvg"), "answer": gt, "extracted": '{"time": [0, 2], "boxes": {"0": [0, 0, 10, 10], '
                                                                       '"1": [0, 0, 10, 10]}}'}
    failed = {**result(None, FAIL, task_type="stvg"), "answer": gt, "extracted": None}
    agg = aggregate([ok, failed], Aggregation("stvg"))
    assert close(agg["official"]["m_vIoU"], 0.5) and close(agg["official"]["m_tIoU"], 0.5)
    assert close(agg["score"], 0.5) and close(agg["predecessor_combined"]["score"], 0.5)


def test_category_bins_and_labels() -> None:
    rows = [result(1.0, d=30), result(0.0, d=60), result(1.0, d=500), result(1.0, d="n/a"), result(0.0, ocr=1),
            result(1.0, ocr=0)]
    cats = [Category("duration", "d", bins=(60.0, 300.0)), Category("ocr", "ocr", labels={"0": "non-OCR", "1": "OCR"})]
    agg = aggregate(rows, Aggregation("micro"), cats)
    assert agg["by_duration"] == {"-60": {"score": 1.0, "n": 1}, "60-300": {"score": 0.0, "n": 1},
                                  "300-": {"score": 1.0, "n": 1}, "unknown": {"score": 1.0, "n": 1}}
    assert agg["by_ocr"] == {"OCR": {"score": 0.0, "n": 1}, "non-OCR": {"score": 1.0, "n": 1}}


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown aggregation kind 'median'"):
        aggregate([result(1.0)], Aggregation("median"))


def test_benchmark_aggregate_uses_its_card() -> None:
    rows = [result(1.0, original_question_type="object_rel_direction_easy"),
            result(0.0, original_question_type="object_rel_direction_medium"),
            result(0.5, task_type="regression", original_question_type="object_counting")]
    agg = get_benchmark("vsibench").aggregate(rows)
    assert agg["by_task"] == {"object_counting": 0.5, "object_rel_direction": 0.5} and close(agg["score"], 0.5)


# ----------------------------------------------------------------------------------- labelled fallbacks (#29)


def test_stvg_from_the_unified_file_is_labelled_a_fallback() -> None:
    """Without the release's meta fields LLaVA-ST's token parser cannot run: the headline says it is the JSON
    reading and headline_basis names what would give the official m_vIoU."""
    gt = '{"time": [0, 2], "boxes": {"0": [0, 0, 10, 10], "1": [0, 0, 10, 10], "2": [0, 0, 10, 10]}}'
    item = {**result(1.0, task_type="stvg"), "answer": gt, "details": {"tiou": 1.0, "siou": 1.0, "viou": 1.0}}
    unified = get_benchmark("stvg").aggregate([item, item])
    basis = unified["headline_basis"]
    assert "official ST-Align metric" not in unified["headline"] and "JSON" in unified["headline"]
    assert "token" in basis["official"] and "meta" in basis["reason"] and "ST-Align-Benchmark" in basis["reason"]
    meta = {"split": [0, 49], "width": 640, "height": 360, "time_token": {"<s>": 0, "<e>": 20}}
    release = get_benchmark("stvg").aggregate([{**item, "fields": {"meta": meta}}] * 2)
    assert "headline_basis" not in release and release["headline"] == "m_vIoU (official ST-Align metric)"


def test_mvbench_with_missing_tasks_says_so() -> None:
    rows = [result(1.0, task=f"t{i}") for i in range(18)] + [result(0.0, task="t0")]
    agg = get_benchmark("mvbench").aggregate(rows)
    basis = agg["headline_basis"]
    assert basis["official"] == "unweighted mean over the 20 task groups"
    assert basis["reported"] == "unweighted mean over the 18 present" and "2 of the 20" in basis["reason"]
    full = get_benchmark("mvbench").aggregate([result(1.0, task=f"t{i}") for i in range(20)])
    assert "headline_basis" not in full


def test_mvbench_unified_basis_names_the_two_missing_tasks() -> None:
    agg = get_benchmark("mvbench").aggregate([result(1.0), result(0.0)])
    reason = agg["headline_basis"]["reason"]
    assert "nturgbd" in reason and "tvqa" in reason and "3,586" in reason


def test_dropped_items_leave_the_denominator() -> None:
    rows = [result(1.0), result(0.0), {**result(0.0), "dropped": True}, {**result(None, FAIL), "dropped": True}]
    agg = aggregate(rows, Aggregation("micro"))
    assert agg["n_dropped"] == 1 and close(agg["score"], 1 / 3)  # a failure still counts 0


def test_the_table_notes_what_stvg_reported_instead() -> None:
    import io

    from vbench_async.cli.output import print_table

    gt = '{"time": [0, 2], "boxes": {"0": [0, 0, 10, 10]}}'
    item = {**result(1.0, task_type="stvg"), "answer": gt, "details": {"tiou": 1.0, "siou": 1.0, "viou": 1.0}}
    block = {**get_benchmark("stvg").aggregate([item]), "status": "complete"}
    buf = io.StringIO()
    print_table({"benchmarks": {"stvg": block}}, file=buf)
    assert "stvg: m_vIoU by the same definition on the JSON answer" in buf.getvalue()
    assert "appletea2333/ST-Align-Benchmark" in buf.getvalue()
