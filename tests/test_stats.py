"""Statistics against examples worked by hand (the arithmetic is in the comments), and the CI of official headlines."""

from __future__ import annotations

import math

import pytest

from vbench_async.benchmarks import get_benchmark
from vbench_async.results.stats import (
    Estimate,
    category_estimates,
    combine_independent,
    estimate,
    headline_estimate,
    macro_ci,
    mean_ci,
    paired_compare,
    sign_test,
    t_quantile,
    t_two_sided_p,
)

# Student's t with 2 degrees of freedom has closed forms, so df = 2 examples can be checked by hand:
#   two-sided p(t) = 1 - t / sqrt(2 + t^2)
#   97.5% quantile: t / sqrt(2 + t^2) = 0.95  ->  t^2 = 0.9025 * 2 / 0.0975 = 18.512820...  ->  t = 4.302653
T2 = math.sqrt(0.9025 * 2 / 0.0975)


def test_t_distribution_closed_forms():
    assert T2 == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(0.975, 2) == pytest.approx(T2, abs=1e-9)
    assert t_two_sided_p(math.sqrt(3), 2) == pytest.approx(1 - math.sqrt(3) / math.sqrt(5), abs=1e-12)
    # df = 1 is the Cauchy distribution: p(t) = 1 - 2/pi * atan(|t|); p(1) = 0.5
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5, abs=1e-12)
    assert t_two_sided_p(-3.0, 1) == pytest.approx(1 - 2 / math.pi * math.atan(3), abs=1e-12)
    # large df tends to the normal: 1.959964
    assert t_quantile(0.975, 10**7) == pytest.approx(1.959964, abs=1e-5)
    assert t_two_sided_p(0.0, 5) == pytest.approx(1.0)


def test_mean_ci_iid_by_hand():
    # y = 1, 0, 1: mean 2/3; residuals 1/3, -2/3, 1/3; sum of squares 6/9; s^2 = (6/9) / 2 = 1/3;
    # SE = sqrt(s^2 / n) = sqrt(1/9) = 1/3; df = 2; half-width = 4.302653 / 3 = 1.434218
    e = mean_ci([1.0, 0.0, 1.0])
    assert e.value == pytest.approx(2 / 3)
    assert e.se == pytest.approx(1 / 3)
    assert e.ci_low == pytest.approx(2 / 3 - T2 / 3) and e.ci_high == pytest.approx(2 / 3 + T2 / 3)
    assert (e.n, e.n_clusters) == (3, 3)
    # the interval can be clipped to the range a score takes
    clipped = estimate([1.0, 0.0, 1.0], bounds=(0.0, 1.0))
    assert (clipped.ci_low, clipped.ci_high) == (0.0, 1.0) and clipped.se == e.se


def test_mean_ci_clustered_by_video_by_hand():
    # y = 1, 1, 0, 0, 1 on videos v1, v1, v2, v3, v3: mean 0.6; residuals .4, .4, -.6, -.6, .4
    # per-video sums: v1 = 0.8, v2 = -0.6, v3 = -0.2; squares 0.64 + 0.36 + 0.04 = 1.04
    # Var = G/(G-1) * 1.04 / n^2 = 3/2 * 1.04 / 25 = 0.0624; SE = 0.249800; df = G - 1 = 2
    e = mean_ci([1, 1, 0, 0, 1], ["v1", "v1", "v2", "v3", "v3"])
    assert e.value == pytest.approx(0.6)
    assert e.se == pytest.approx(math.sqrt(0.0624))
    assert e.ci_high - e.value == pytest.approx(T2 * math.sqrt(0.0624))
    assert e.n_clusters == 3
    # Without clusters the SE is the textbook one: s^2 = (3 * .16 + 2 * .36) / 4 = 0.3, SE = sqrt(0.3 / 5)
    assert mean_ci([1, 1, 0, 0, 1]).se == pytest.approx(math.sqrt(0.06))


def test_macro_ci_by_hand():
    # groups a: 1, 0 (mean .5); b: 1, 1 (mean 1); macro mean = .75
    # influence = (1/2) / 2 * residual: a -> +.125, -.125; b -> 0, 0; sum of squares 0.03125
    # Var = 4/3 * 0.03125 = 0.041667; SE = 0.204124
    e = macro_ci([1, 0, 1, 1], ["a", "a", "b", "b"])
    assert e.value == pytest.approx(0.75)
    assert e.se == pytest.approx(math.sqrt(4 / 3 * 0.03125))


def test_degenerate_inputs():
    assert mean_ci([]).value is None
    one = mean_ci([1.0, 0.0], ["v", "v"])  # a single cluster: no variance estimate
    assert one.value == 0.5 and one.se is None and one.ci_low is None
    flat = mean_ci([1.0, 1.0, 1.0])
    assert flat.se == 0.0 and flat.ci_low == flat.ci_high == 1.0
    with pytest.raises(ValueError):
        estimate([1.0], clusters=["a", "b"])


def test_paired_t_test_by_hand():
    # a = 1, 1, .5; b = 0, .5, .5; d = 1, .5, 0: mean .5; s^2 = (.25 + 0 + .25) / 2 = .25;
    # SE = .5 / sqrt(3) = 0.288675; t = .5 / SE = sqrt(3); df = 2; p = 1 - sqrt(3)/sqrt(5) = 0.225403
    c = paired_compare({"x": 1, "y": 1, "z": 0.5, "only-a": 1}, {"x": 0, "y": 0.5, "z": 0.5, "only-b": 0})
    assert c.n == 3 and c.only_a == 1 and c.only_b == 1
    assert c.diff.value == pytest.approx(0.5)
    assert c.diff.se == pytest.approx(0.5 / math.sqrt(3))
    assert c.t == pytest.approx(math.sqrt(3)) and c.df == 2
    assert c.p_t == pytest.approx(0.225403, abs=1e-6)
    assert c.diff.ci_low == pytest.approx(0.5 - T2 * 0.5 / math.sqrt(3))
    assert (c.n_a_better, c.n_b_better, c.n_ties) == (2, 0, 1)
    assert c.sign_test_name == "sign"  # 0.5 is not a 0/1 score
    # sign test on 2 wins, 0 losses: p = 2 * C(2,0) / 2^2 = 0.5
    assert c.p_sign == pytest.approx(0.5)


def test_mcnemar_exact_by_hand():
    # A right / B wrong on 5 samples, A wrong / B right on 1, 2 ties:
    # p = 2 * (C(6,0) + C(6,1)) / 2^6 = 2 * 7 / 64 = 0.21875
    a = dict(zip("abcdefgh", [1, 1, 1, 1, 1, 0, 1, 0]))
    b = dict(zip("abcdefgh", [0, 0, 0, 0, 0, 0, 1, 1]))
    c = paired_compare(a, b)
    assert c.sign_test_name == "mcnemar-exact"
    assert (c.n_a_better, c.n_b_better, c.n_ties) == (5, 1, 2)
    assert c.p_sign == pytest.approx(0.21875)
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0  # capped at 1


def test_paired_clusters_follow_videos():
    # d = 1, 1, 0, 0 on videos v, v, w, w: per-video residual sums +1, -1 (mean .5); Var = 2/1 * 2 / 16 = .25
    c = paired_compare({"1": 1, "2": 1, "3": 0, "4": 0}, {"1": 0, "2": 0, "3": 0, "4": 0},
                       {"1": "v", "2": "v", "3": "w", "4": "w"})
    assert c.diff.se == pytest.approx(0.5) and c.df == 1


def test_combine_independent_by_hand():
    # mean of .8 (SE .03) and .6 (SE .04) = .7; SE = sqrt(.0009 + .0016) / 2 = .025; normal 95%: +-1.959964 * .025
    e = combine_independent([Estimate(0.8, 0.03, None, None, 10, 10), Estimate(0.6, 0.04, None, None, 10, 10)])
    assert e.value == pytest.approx(0.7) and e.se == pytest.approx(0.025)
    assert e.ci_high == pytest.approx(0.7 + 1.959964 * 0.025, abs=1e-6)
    assert combine_independent([Estimate(0.8, None, None, None, 1, 1)]).se is None


def _result(sid, score, video, **fields):
    return {"sample_id": sid, "video": video, "score": score, "error": None, "task_type": "multiple choice",
            "fields": fields}


def test_headline_estimate_matches_the_official_aggregate():
    # MLVU: macro mean over `task`; OVO-Bench: hierarchical task -> category -> overall.
    mlvu = get_benchmark("mlvu")
    results = [_result(str(i), float(i % 3 == 0), f"v{i // 2}", task=["count", "order", "plot"][i % 3])
               for i in range(12)]
    results.append({**_result("err", None, "v99", task="count"), "error": {"kind": "decode", "message": "x"}})
    est = headline_estimate(results, mlvu.card.aggregation)
    assert est.value == pytest.approx(mlvu.aggregate(results)["score"])
    assert est.n == 13 and est.se > 0

    ovo = get_benchmark("ovobench")
    rows = [_result(str(i), float(i % 4 != 0), f"v{i}", ovo_task=f"t{i % 3}", ovo_category=f"c{i % 2}")
            for i in range(14)]
    est = headline_estimate(rows, ovo.card.aggregation)
    assert est.value == pytest.approx(ovo.aggregate(rows)["score"])

    videomme = get_benchmark("videomme")
    est = headline_estimate(rows, videomme.card.aggregation)
    assert est.value == pytest.approx(videomme.aggregate(rows)["score"])
    assert headline_estimate(rows, get_benchmark("stvg").card.aggregation) is None  # m_vIoU is not a sample mean


def test_category_estimates_use_the_official_breakdown_names():
    bench = get_benchmark("videomme")
    rows = [_result(str(i), float(i % 2), f"v{i // 3}", duration=["short", "long"][i % 2], domain="x")
            for i in range(8)]
    cats = category_estimates(rows, bench.card.categories)
    official = bench.aggregate(rows)
    assert set(cats) <= set(official) | {"by_task_type"}
    assert cats["by_duration"]["long"].value == pytest.approx(official["by_duration"]["long"]["score"])
    assert cats["by_duration"]["long"].n == 4 and cats["by_duration"]["long"].n_clusters == 3
