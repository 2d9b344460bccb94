"""Statistics over per-sample results: scores with standard errors and confidence intervals, and paired comparisons.

Pure functions. Questions that share a video are not independent, so standard errors are cluster-robust (clustered by
video): every estimate here is a weighted mean of stratum means, theta = sum_k W_k * mean_k, whose variance is

    Var(theta) = G / (G - 1) * sum_g ( sum_{i in g} (W_k(i) / n_k(i)) * (y_i - mean_k(i)) )^2      (G clusters)

With one stratum and one sample per cluster this is the textbook s^2 / n. Intervals use Student's t with G - 1 degrees
of freedom (the usual choice for clustered errors; it tends to the normal 1.96 for large G). A failed or unscored sample
counts as 0, exactly as in the official aggregation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

from ..benchmarks.aggregate import category_key, value
from ..benchmarks.cards import Aggregation
from ..sample_result import Result, as_results

# ------------------------------------------------------------------------------------------- distributions


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on the CDF; p in (0.5, 1))."""
    if not 0.5 <= p < 1.0:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1, got {p}")
    target = 2.0 * (1.0 - p)  # the two-sided tail mass at the answer
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


def sign_test(n_pos: int, n_neg: int) -> float:
    """Exact two-sided sign test (McNemar's exact test when the pairs are 0/1): ties are left out."""
    n = n_pos + n_neg
    if n == 0:
        return 1.0
    k = min(n_pos, n_neg)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


# ---------------------------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Estimate:
    """A score with its cluster-robust standard error and confidence interval (None where undefined)."""

    value: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_clusters: int
    level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate(values: Sequence[float], clusters: Sequence[Hashable] | None = None,
             strata: Sequence[Hashable] | None = None, stratum_weights: Mapping[Hashable, float] | None = None,
             level: float = 0.95, bounds: tuple[float, float] | None = None) -> Estimate:
    """theta = sum_k W_k * mean(stratum k) with a cluster-robust SE.

    `clusters[i]` is sample i's cluster (its video; default: every sample its own). `strata[i]` its stratum (default:
    one). `stratum_weights` default to the stratum's share of samples, which makes theta the plain mean. `bounds`
    clips the interval to the range the score can take (a small sample's t interval can leave [0, 1]).
    """
    n = len(values)
    clusters = list(clusters) if clusters is not None else list(range(n))
    strata = list(strata) if strata is not None else [0] * n
    if len(clusters) != n or len(strata) != n:
        raise ValueError("values, clusters and strata must have the same length")
    n_clusters = len(set(clusters))
    if n == 0:
        return Estimate(None, None, None, None, 0, 0, level)
    sums: dict[Hashable, float] = defaultdict(float)
    counts: dict[Hashable, int] = defaultdict(int)
    for y, k in zip(values, strata):
        sums[k] += y
        counts[k] += 1
    means = {k: sums[k] / counts[k] for k in sums}
    weights = dict(stratum_weights) if stratum_weights is not None else {k: counts[k] / n for k in counts}
    missing = set(means) - set(weights)
    if missing:
        raise ValueError(f"no weight for strata {sorted(map(str, missing))}")
    theta = sum(weights[k] * means[k] for k in means)
    if n_clusters < 2:
        return Estimate(theta, None, None, None, n, n_clusters, level)
    influence: dict[Hashable, float] = defaultdict(float)  # per cluster: sum of weighted residuals
    for y, g, k in zip(values, clusters, strata):
        influence[g] += weights[k] / counts[k] * (y - means[k])
    var = n_clusters / (n_clusters - 1) * sum(v * v for v in influence.values())
    se = math.sqrt(var)
    half = t_quantile(0.5 + level / 2.0, n_clusters - 1) * se
    low, high = theta - half, theta + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Estimate(theta, se, low, high, n, n_clusters, level)


def mean_ci(values: Sequence[float], clusters: Sequence[Hashable] | None = None, level: float = 0.95) -> Estimate:
    """Mean with a (cluster-robust) standard error and a t interval."""
    return estimate(values, clusters, level=level)


def macro_ci(values: Sequence[float], groups: Sequence[Hashable], clusters: Sequence[Hashable] | None = None,
             level: float = 0.95) -> Estimate:
    """Unweighted mean of group means (e.g. MLVU's M-Avg), with its SE."""
    keys = set(groups)
    return estimate(values, clusters, groups, {k: 1.0 / len(keys) for k in keys}, level)


def combine_independent(estimates: Sequence[Estimate], level: float = 0.95,
                        bounds: tuple[float, float] | None = (0.0, 1.0)) -> Estimate:
    """Plain average of independent estimates (a suite average over benchmarks); normal interval."""
    if not estimates or any(e.value is None for e in estimates):
        return Estimate(None, None, None, None, sum(e.n for e in estimates), 0, level)
    k = len(estimates)
    theta = sum(e.value or 0.0 for e in estimates) / k  # every value is set (above)
    n, g = sum(e.n for e in estimates), sum(e.n_clusters for e in estimates)
    ses = [e.se for e in estimates]
    if any(s is None for s in ses):
        return Estimate(theta, None, None, None, n, g, level)
    se = math.sqrt(sum(s**2 for s in ses if s is not None)) / k
    z = _normal_quantile(0.5 + level / 2.0)
    low, high = theta - z * se, theta + z * se
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Estimate(theta, se, low, high, n, g, level)


def _normal_quantile(p: float) -> float:
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


# -------------------------------------------------------------------------------------------- paired runs


@dataclass(frozen=True)
class PairedComparison:
    """Run A minus run B on the sample ids both hold."""

    n: int
    mean_a: float | None
    mean_b: float | None
    diff: Estimate  # mean of a_i - b_i, clustered like any estimate
    t: float | None  # paired t statistic (clustered SE); None when the SE is 0 or undefined
    df: int | None
    p_t: float | None
    n_a_better: int
    n_b_better: int
    n_ties: int
    p_sign: float  # exact sign test; McNemar's exact test when every score is 0 or 1
    sign_test_name: str
    only_a: int  # ids only one run holds: reported, never compared
    only_b: int

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["diff"] = self.diff.to_dict()
        return out


def paired_compare(a: Mapping[str, float], b: Mapping[str, float], clusters: Mapping[str, Hashable] | None = None,
                   level: float = 0.95) -> PairedComparison:
    """Compare two runs' per-sample scores (id -> value) on their common ids."""
    ids = [i for i in a if i in b]
    diffs = [a[i] - b[i] for i in ids]
    groups = [clusters.get(i, i) for i in ids] if clusters is not None else None
    diff = estimate(diffs, groups, level=level, bounds=(-1.0, 1.0))
    t = df = p_t = None
    if diff.se is not None and diff.se > 0 and diff.value is not None:
        t, df = diff.value / diff.se, diff.n_clusters - 1
        p_t = t_two_sided_p(t, df)
    pos = sum(1 for d in diffs if d > 0)
    neg = sum(1 for d in diffs if d < 0)
    binary = all(a[i] in (0.0, 1.0) and b[i] in (0.0, 1.0) for i in ids)
    return PairedComparison(
        n=len(ids),
        mean_a=sum(a[i] for i in ids) / len(ids) if ids else None,
        mean_b=sum(b[i] for i in ids) / len(ids) if ids else None,
        diff=diff, t=t, df=df, p_t=p_t,
        n_a_better=pos, n_b_better=neg, n_ties=len(ids) - pos - neg,
        p_sign=sign_test(pos, neg), sign_test_name="mcnemar-exact" if binary else "sign",
        only_a=sum(1 for i in a if i not in b), only_b=sum(1 for i in b if i not in a),
    )


# ------------------------------------------------------------------------------------------ result lines


Line = Result | Mapping[str, Any]  # a result, or a line not yet read into one (tests, older callers)


def cluster_of(r: Result) -> str:
    """Questions on the same video form one cluster; a sample without a video is its own."""
    return f"video:{r.video}" if r.video else f"sample:{r.sample_id}"


def clusters_of(results: Iterable[Result]) -> list[str]:
    """`cluster_of` of each result, one string per video however many questions share it (a new one per line would be
    100,000 strings for a suite of a few thousand videos)."""
    known: dict[str, str] = {}
    out = []
    for r in results:
        if r.video:
            found = known.get(r.video)
            if found is None:
                found = known[r.video] = cluster_of(r)
            out.append(found)
        else:
            out.append(cluster_of(r))
    return out


def values_by_id(lines: Iterable[Line]) -> tuple[dict[str, float], dict[str, str]]:
    """(sample id -> contribution, sample id -> cluster) of a run's results."""
    vals, groups = {}, {}
    for r in as_results(lines):
        vals[r.sample_id], groups[r.sample_id] = value(r), cluster_of(r)
    return vals, groups


def headline_estimate(lines: Sequence[Line], aggregation: Aggregation | None = None,
                      level: float = 0.95) -> Estimate | None:
    """The CI of a benchmark's headline score, for the aggregation kinds that are weighted means of per-sample scores
    (micro, by_field, macro, hierarchical, temporal_grounding). None for the others (STVG, VideoMathQA), whose
    headline is not such a mean."""
    results = as_results(lines)
    aggregation = aggregation or Aggregation()
    kind = aggregation.kind
    unit = (0.0, 1.0)
    results = [r for r in results if not r.dropped or r.failed]  # as the aggregation leaves them out
    ys = [value(r) for r in results]
    cl = clusters_of(results)
    if kind in ("micro", "by_field", "temporal_grounding"):
        return estimate(ys, cl, level=level, bounds=unit)
    if kind == "macro":
        group_field = aggregation.field or ""  # card_check: a macro card names its field
        keep = [i for i, r in enumerate(results) if r.field_value(group_field) is not None]
        if not keep:  # the aggregation falls back to the plain mean in this case too
            return estimate(ys, cl, level=level, bounds=unit)
        groups = [str(results[i].field_value(group_field)) for i in keep]
        merged_of = {part: m for m, parts in aggregation.merge.items() for part in parts}
        present = set(groups)
        final = {merged_of.get(g, g) for g in present}  # groups after folding the merged parts
        size: dict[str, int] = defaultdict(int)
        for g in present:
            size[merged_of.get(g, g)] += 1
        weights: dict[Hashable, float] = {g: 1.0 / (len(final) * size[merged_of.get(g, g)]) for g in present}
        return estimate([ys[i] for i in keep], [cl[i] for i in keep], groups, weights, level, unit)
    if kind == "hierarchical":
        task_field, category_field = aggregation.levels or ("task", "category")
        tasks = [str(r.field_value(task_field)) for r in results]
        cats = [str(r.field_value(category_field)) for r in results]
        tasks_in: dict[str, set[str]] = defaultdict(set)
        for t, c in zip(tasks, cats):
            tasks_in[c].add(t)
        strata = list(zip(cats, tasks))
        if aggregation.overall == "tasks":  # OVO-Bench: every task weighs the same, whatever its category
            strata_weights: dict[Hashable, float] = {s: 1.0 / len(set(strata)) for s in set(strata)}
        else:
            strata_weights = {(c, t): 1.0 / (len(tasks_in) * len(tasks_in[c])) for c, t in set(strata)}
        return estimate(ys, cl, strata, strata_weights, level, unit)
    return None


def grouped_estimates(results: Sequence[Result], key: Callable[[Result], Any],
                      level: float = 0.95) -> dict[str, Estimate]:
    """Per-group mean with CI (samples whose key is None are in no group)."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        k = key(r)
        if k is not None:
            groups[str(k)].append(r)
    return {k: estimate([value(r) for r in rs], [cluster_of(r) for r in rs], level=level, bounds=(0.0, 1.0))
            for k, rs in sorted(groups.items())}


def category_estimates(lines: Sequence[Line], categories: Iterable[Any] = (),
                       level: float = 0.95) -> dict[str, dict[str, Estimate]]:
    """Breakdowns named as in the official aggregate (`by_task_type`, `by_<category>`), each group with its CI."""
    results = as_results(lines)
    out: dict[str, dict[str, Estimate]] = {}
    by_task = grouped_estimates(results, lambda r: r.task_type or None, level)
    if len(by_task) > 1:
        out["by_task_type"] = by_task
    for cat in categories:
        groups = grouped_estimates(results, category_key(cat), level)
        if groups:
            out[f"by_{cat.name}"] = groups
    return out
