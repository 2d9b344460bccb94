"""Official aggregations: per-sample results -> headline score and breakdowns. Pure functions.

The results may be seen through one reading of the outputs (`Result.seen_as`: `score` is that
reading's value); summaries aggregate each benchmark under both. Every kind follows one rule: a failed sample
(error set) or an unscored one (score None) counts as 0 in every denominator it belongs to, so a run that loses
samples can never score higher for it. `n_failed` and `n_pending` say how many there were. The one exception is
the official code's own: a line marked `dropped` (an empty prediction that MVBench's and Video-MMMU's official
aggregations leave out of the denominator) is left out, and `n_dropped` counts it.
Scores are fractions in [0, 1].

Where a second number differs from the headline, it stands beside it, labelled: `also_reported: {name: {score,
definition}}` (a macro headline's pooled mean; a per-group report's unweighted mean).

Kinds (card `aggregation.kind`):
    micro            mean over all samples (optionally `field`: its breakdown is the one the benchmark reports;
                     `official_per`: the official code reports one number per group of that field and no overall,
                     given as `official_by_<field>`, the pooled mean stays the labelled headline)
    macro            unweighted mean over groups of `field`; `merge` folds sub-groups first (VSI-Bench directions)
    hierarchical     `levels: [task, category]`: task means -> category means -> overall mean (OVO-Bench)
    temporal_grounding  mIoU and R@thresholds (Charades-STA)
    stvg             official m_tIoU / m_sIoU / m_vIoU and hit rates, plus the predecessor's combined score
    videomathqa      MCQ accuracy, MBin (all binary variants of a question right) and the predecessor's micro mean
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping

from ..sample_result import Result, as_results
from .cards import Aggregation, Category


def value(r: Result) -> float:
    """A result's contribution: its score, or 0 when it failed or was never scored."""
    if r.failed or r.score is None:
        return 0.0
    return float(r.score) if math.isfinite(r.score) else 0.0


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _group(results: list[Result], key: Callable[[Result], Any]) -> dict[str, list[Result]]:
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        k = key(r)
        if k is not None:
            groups[str(k)].append(r)
    return dict(sorted(groups.items()))


def _stats(results: list[Result]) -> dict[str, Any]:
    return {"score": mean(value(r) for r in results), "n": len(results)}


def category_value(cat: Category, fields: Mapping[str, Any]) -> Any:
    """The group a sample with these category fields falls in under `cat` (None: in no group)."""
    v = fields.get(cat.field)
    if v in (None, ""):
        return None
    if cat.bins:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return "unknown"
        edges = [-math.inf, *cat.bins, math.inf]
        for lo, hi in zip(edges, edges[1:]):
            if lo <= x < hi:
                return f"{'' if lo == -math.inf else f'{lo:g}'}-{'' if hi == math.inf else f'{hi:g}'}"
    return cat.labels.get(str(v).lower(), v) if cat.labels else v


def category_key(cat: Category) -> Callable[[Result], Any]:
    return lambda r: category_value(cat, r.fields)


def breakdowns(results: list[Result], categories: Iterable[Category]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    task_groups = _group(results, lambda r: r.task_type or None)
    if len(task_groups) > 1:
        out["by_problem_type"] = {k: _stats(v) for k, v in task_groups.items()}
    for cat in categories:
        groups = _group(results, category_key(cat))
        if groups:
            out[f"by_{cat.name}"] = {k: _stats(v) for k, v in groups.items()}
    return out


# ----------------------------------------------------------------------------------------------------- kinds


def _micro(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    out: dict[str, Any] = {"score": mean(value(r) for r in results), "headline": "mean over all samples"}
    if spec.field:
        out["headline"] += f" (breakdown by {spec.field})"
    per = spec.official_per  # the official code reports one number per group of this field, no overall
    if per:
        official = _official_per(results, per)
        if official:
            out["headline"] = (f"mean over all samples, pooled (the official code reports one accuracy per {per}, "
                               f"no overall: official_by_{per})")
            out[f"official_by_{per}"] = official
            scored = [g["score"] for g in official.values() if g["score"] is not None]
            if len(scored) == len(official):
                out["also_reported"] = {f"mean_of_{per}_scores": {
                    "score": mean(scored),
                    "definition": f"unweighted mean of the official per-{per} accuracies (in no official output; "
                                  f"equal to the pooled mean only when every {per} has as many items)"}}
    return out


def _official_per(results: list[Result], field: str) -> dict[str, dict[str, Any]]:
    """The official per-group accuracies (lmms-eval's one task per Video-MMMU track or TempCompass format): the mean
    within the group; None while an item of the group still waits for a judge."""
    out: dict[str, dict[str, Any]] = {}
    for k, rs in _group(results, lambda r: r.field_value(field)).items():
        waiting = sum(1 for r in rs if r.awaits_judge())
        out[k] = {"score": None if waiting else mean(value(r) for r in rs), "n": len(rs)}
        if waiting:
            out[k]["n_needs_judge"] = waiting
    return out


def _macro(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    field = spec.field or ""  # card_check: a macro card names its field
    groups = _group(results, lambda r: r.field_value(field))
    if not groups:
        reason = spec.unavailable or f"the records carry no {field!r} field"
        return {"score": mean(value(r) for r in results),
                "headline": f"mean over all samples (records carry no {field!r} field for the official macro mean)",
                "headline_basis": {"official": f"unweighted mean over {field} groups",
                                   "reported": "mean over all samples", "reason": reason}}
    scores = {k: mean(value(r) for r in v) for k, v in groups.items()}
    for merged, parts in spec.merge.items():
        present = [scores.pop(p) for p in parts if p in scores]
        if present:
            scores[merged] = mean(present)
    missing = sum(1 for r in results if r.field_value(field) is None)
    out = {"score": mean(scores.values()), "headline": f"unweighted mean over {len(scores)} {field} groups",
           f"by_{spec.name or field}": {k: scores[k] for k in sorted(scores)}}
    expected = spec.groups  # the official mean runs over this many groups (MVBench: 20 tasks)
    if expected and len(scores) < expected:
        out["headline_basis"] = {"official": f"unweighted mean over the {expected} {field} groups",
                                 "reported": f"unweighted mean over the {len(scores)} present",
                                 "reason": f"{expected - len(scores)} of the {expected} {field} groups have no "
                                           "record here; the full release gives the official mean"}
    if missing:
        out["n_without_group"] = missing  # not in any group: reported, never silently dropped
    pooled = mean(value(r) for r in results)
    if pooled is not None and not math.isclose(pooled, out["score"], abs_tol=1e-12):
        out["also_reported"] = {"mean_over_samples": {
            "score": pooled, "definition": f"mean over all samples, pooled across {field} groups (not the official "
                                           f"headline, which weighs every {field} group equally)"}}
    return out


def _hierarchical(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    task_field, category_field = spec.levels or ("task", "category")
    tasks: dict[str, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    missing = 0
    for r in results:
        task, category = r.field_value(task_field), r.field_value(category_field)
        if task is None or category is None:  # no group to put it in: counted and reported, as _macro does
            missing += 1
            continue
        tasks[str(category)][str(task)].append(r)
    if not tasks:
        return {"score": mean(value(r) for r in results),
                "headline": f"mean over all samples (records carry no {task_field!r}/{category_field!r} fields)",
                "headline_basis": {"official": f"mean of {category_field} scores, each the mean of its {task_field} "
                                               "scores", "reported": "mean over all samples",
                                   "reason": "the records carry no fields to group by"},
                "n_without_group": missing}
    by_task, by_category, every_task, category_means = {}, {}, [], []
    for category, task_map in sorted(tasks.items()):
        task_scores = {t: mean(value(r) for r in rs) for t, rs in sorted(task_map.items())}
        every_task.extend(task_scores.values())
        for t, s in task_scores.items():
            by_task[t] = {"score": s, "n": len(task_map[t]), category_field: category}
        category_means.append(mean(task_scores.values()))
        by_category[category] = {"score": category_means[-1], "n_tasks": len(task_scores)}
    # OVO-Bench's current scorer (utils/OVOBenchScore.py since March 2025) prints the mean of the category means;
    # `overall: tasks` keeps the January 2025 README's plain mean of the task scores as a named variant
    if spec.overall == "tasks":
        score, headline = mean(every_task), f"mean of the {task_field} scores"
    else:
        score = mean(category_means)
        headline = f"mean of {category_field} scores, each the mean of its {task_field} scores"
    out = {"score": score, "headline": headline, f"by_{task_field}": by_task, f"by_{category_field}": by_category,
           f"mean_of_{category_field}_means": mean(category_means), f"mean_of_{task_field}_scores": mean(every_task)}
    if missing:
        out["n_without_group"] = missing  # not in any group: reported, never silently dropped
    return out


def _temporal_grounding(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    from ..scoring import recall_at_iou

    ious = [value(r) for r in results]
    return {"score": mean(ious), "headline": "mIoU", "mIoU": mean(ious), **recall_at_iou(ious, spec.thresholds)}


def _stvg_item(r: Result) -> dict[str, float]:
    """Official per-item metrics of one result (ST-Align `eval_stvg`): the scorer's tiou / siou / viou, computed in
    the frame the model saw. Older result lines without them are re-read from the answer and the extraction. A line
    seen through one reading (`Result.seen_as`) takes its vIoU from that reading."""
    details = r.details
    if r.failed:
        return {"tiou": 0.0, "siou": 0.0, "viou": 0.0}
    if all(isinstance(details.get(k), (int, float)) for k in ("tiou", "siou", "viou")):
        item = {k: float(details[k]) for k in ("tiou", "siou", "viou")}
        if r.seen_reading is not None:
            item["viou"] = value(r)
        return item
    from ..scoring import box_iou, interval_iou
    from ..scoring.grounding import parse_span_boxes

    gt = parse_span_boxes(r.answer)
    pred = parse_span_boxes(r.extracted) if r.extracted else None
    if gt is None or pred is None:
        return {"tiou": 0.0, "siou": 0.0, "viou": 0.0}
    (span, boxes), (gt_span, gt_boxes) = pred, gt
    gt_set = {k for k, b in gt_boxes.items() if b is not None}
    pred_set = {k for k, b in boxes.items() if b is not None}
    inter = [box_iou(boxes[k], gt_boxes[k]) for k in gt_set & pred_set]
    return {"tiou": interval_iou(span, gt_span), "siou": sum(inter) / max(len(inter), 1),
            "viou": sum(inter) / max(len(gt_set | pred_set), 1)}


def _stvg(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    """Official means run over every item, as `eval_stvg` divides by all annotations: an item without boxes on
    either side adds 0 to m_sIoU and m_vIoU instead of leaving the average."""
    from ..scoring import recall_at_iou

    items = [_stvg_item(r) for r in results]
    thresholds = spec.thresholds
    official: dict[str, Any] = {"m_tIoU": mean(i["tiou"] for i in items), "m_sIoU": mean(i["siou"] for i in items),
                                "m_vIoU": mean(i["viou"] for i in items)}
    for name in ("tiou", "siou", "viou"):
        hits = recall_at_iou([i[name] for i in items], thresholds)
        label = {"tiou": "tIoU", "siou": "sIoU", "viou": "vIoU"}[name]
        official.update({k.replace("R@", f"{label}@"): v for k, v in hits.items()})
    # EasyVideoR1's number is the scorer's own value, whichever reading the lines are seen through
    predecessor = mean(value(replace(r, score=r.scorer_score)) for r in results)
    headline = spec.headline or "m_vIoU"
    out: dict[str, Any] = {"score": official.get(headline), "headline": f"{headline} (official ST-Align metric)"}
    needs = spec.official_field  # the card's field the official parser needs (ST-Align: meta)
    without_meta = sum(1 for r in results if not isinstance(r.field_value(needs), Mapping)) if needs else 0
    if without_meta:  # the unified file: the official parser cannot run, the project's JSON reading stands in
        out["headline"] = f"{headline} of the JSON reading in seconds (not LLaVA-ST's token parser)"
        out["headline_basis"] = {
            "official": f"{headline} of LLaVA-ST's eval_stvg: special tokens over 100 frames of the clip, mapped by "
                        "the release's frame split and frame size",
            "reported": f"{headline} by the same definition on the JSON answer in seconds, boxes compared as given",
            "reason": spec.unavailable or f"{without_meta} of {len(results)} record(s) lack the "
                      "release's meta fields (frame split, width, height); the hub source "
                      "(appletea2333/ST-Align-Benchmark) carries them"}
    return {**out, "official": official,
            "predecessor_combined": {"score": predecessor,
                                     "definition": "mean of 0.5*tIoU + 0.5*box IoU (tIoU alone without boxes); "
                                                   "EasyVideoR1's number, not an official metric"}}


def _videomathqa(results: list[Result], spec: Aggregation) -> dict[str, Any]:
    mcq = [r for r in results if r.field_value("mbin_group") is None]
    groups = _group([r for r in results if r.field_value("mbin_group") is not None],
                    lambda r: r.field_value("mbin_group"))
    scores = {"mcq": mean(value(r) for r in mcq),
              "mbin": mean(1.0 if all(value(r) == 1.0 for r in g) else 0.0 for g in groups.values()),
              "predecessor_micro": mean(value(r) for r in results)}
    parts = {"mcq": {"score": scores["mcq"], "n": len(mcq)},
             "mbin": {"score": scores["mbin"], "n_questions": len(groups), "n": sum(map(len, groups.values()))},
             "predecessor_micro": {"score": scores["predecessor_micro"], "n": len(results),
                                   "definition": "mean over every record, MCQ and binary alike (EasyVideoR1's number)"}}
    headline = spec.headline or "mcq"
    return {"score": scores[headline], "headline": f"{headline} (VideoMathQA)", **parts}


KINDS: dict[str, Callable[[list[Result], Aggregation], dict[str, Any]]] = {
    "micro": _micro,
    "by_field": _micro,
    "macro": _macro,
    "hierarchical": _hierarchical,
    "temporal_grounding": _temporal_grounding,
    "stvg": _stvg,
    "videomathqa": _videomathqa,
}


def aggregate(lines: Iterable[Result | Mapping[str, Any]], spec: Aggregation, categories: Iterable[Category] = (),
              metric: str = "") -> dict[str, Any]:
    if spec.kind not in KINDS:
        raise ValueError(f"unknown aggregation kind {spec.kind!r}; known: {', '.join(KINDS)}")
    results = as_results(lines)
    failed = sum(1 for r in results if r.failed)
    pending = sum(1 for r in results if not r.failed and r.score is None)
    needs_judge = sum(1 for r in results if r.awaits_judge())  # free text, or an official reading, without verdict
    out: dict[str, Any] = {"score": None, "metric": metric, "n_total": len(results),
                           "n_scored": len(results) - failed - pending, "n_failed": failed, "n_pending": pending}
    dropped = sum(1 for r in results if r.dropped and not r.failed)
    if dropped:
        out["n_dropped"] = dropped
        results = [r for r in results if not r.dropped or r.failed]
    if needs_judge:
        out["n_needs_judge"] = needs_judge  # items still carrying their offline value (ROUGE-L or the careful one)
    if results:
        out.update(KINDS[spec.kind](results, spec))
        out.update({k: v for k, v in breakdowns(results, categories).items() if k not in out})
        missing = _missing_breakdowns(results, categories, spec)
        if missing:
            out["unavailable_breakdowns"] = missing
    if needs_judge:  # a text-overlap fallback never stands in the accuracy column
        out["offline_fallback"] = {"score": out.get("score"), "headline": out.get("headline"),
                                   "definition": f"{needs_judge} item(s) scored offline (ROUGE-L, or the careful "
                                                 "grader where the official protocol asks a judge) until a judge "
                                                 "runs; not the benchmark's accuracy"}
        out.update(score=None, headline="needs judge", headline_status="needs judge")
    return out


def _missing_breakdowns(results: list[Result], categories: Iterable[Category],
                        spec: Aggregation) -> dict[str, str]:
    """Official breakdowns the records cannot give (no sample carries the field), each with the reason."""
    return {cat.name: spec.unavailable_breakdowns.get(cat.name, f"the records carry no {cat.field!r} field")
            for cat in categories if not any(r.field_value(cat.field) is not None for r in results)}
