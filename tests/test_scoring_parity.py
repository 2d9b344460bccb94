"""Parity with the official code on golden (record, output) pairs: tests/fixtures/parity/<benchmark>.jsonl.

Each line holds a unified record, a model output, the score (and extracted answer) that the benchmark's official
code gives (obtained by running that code in a scratch environment; only the numbers are committed) and the score
a careful grader gives. The official reading must agree exactly, except for the documented differences listed
in DOCUMENTED below (the only place they are listed); the robust reading must equal the careful grader's.

VBENCH_PARITY_DIR points the test at another folder of such files (for example a parity branch's worktree).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

import pytest

from vbench_async.benchmarks import get_benchmark
from vbench_async.samples import parse_record
from vbench_async.scoring import score

PARITY = Path(os.environ.get("VBENCH_PARITY_DIR") or Path(__file__).resolve().parent / "fixtures" / "parity")
FILES = sorted(PARITY.glob("*.jsonl")) if PARITY.is_dir() else []

# The documented differences, by the marker the fixture line carries (official.<marker> is true).
DOCUMENTED = {
    # The official code draws random.choice from an unseeded generator when nothing parses; ours is seeded by the
    # sample's key. The value may differ; that a guess was made must agree.
    "random_guess": "seeded guess: the drawn letter may differ, the guess itself must be flagged",
    # Video-MMMU drops an empty output ("API Error") from its denominator: the reading is marked dropped (value 0
    # for per-sample use) and the aggregation leaves it out.
    "excluded": "an item the official aggregation drops is marked dropped",
    # The official code raises on the output (LiveSports-3K's response[0] on an empty response): 0 here.
    "error": "an output the official code crashes on scores 0 here",
    # No official scoring code exists (ODV-Bench): the official reading must be empty.
    "unavailable": "no official code: the official reading is empty",
}
# The robust grader claims no value for free text that needs a judge (its `needs_judge` reading): the careful
# grader's value there is a perfect judge's, which only a judge pass can reproduce.
ROBUST_NEEDS_JUDGE = "free text: the robust reading waits for the judge"


def pairs() -> list[tuple[str, dict]]:
    out = []
    for path in FILES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                out.append((path.stem, {**json.loads(line), "_where": f"{path.name}:{n}"}))
    return out


PAIRS = pairs()


def _score(benchmark: str, pair: dict):
    bench = get_benchmark(benchmark)
    sample = parse_record(pair["record"], benchmark=bench.id, index=0)
    return score(sample, pair["output"], protocol=bench.protocol)


def _close(a: float | None, b: float | None) -> bool:
    return a is None and b is None or a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9)


def _check(benchmark: str, pair: dict) -> str | None:
    """None when the pair agrees (or differs only as documented), else what is wrong."""
    s = _score(benchmark, pair)
    official, careful = pair["official"], pair["careful"]
    problems = []
    if official.get("random_guess"):
        if not s.official.guessed:
            problems.append(f"official guessed, ours read {s.official.extracted!r}")
    elif official.get("excluded"):
        if not s.official.dropped:
            problems.append(f"an item the official aggregation drops is not marked dropped ({s.official.value})")
    elif official.get("error"):
        if s.official.value != 0.0:
            problems.append(f"an item the official code drops or crashes on scored {s.official.value}")
    elif official.get("unavailable"):
        if s.official.value is not None:
            problems.append(f"no official code, yet an official value {s.official.value}")
    elif not _close(s.official.value, official["score"]):
        problems.append(f"official {official['score']} (read {official.get('extracted')!r}), "
                        f"ours {s.official.value} (read {s.official.extracted!r})")
    if bool(official.get("dropped") or official.get("excluded")) != s.official.dropped:
        problems.append(f"dropped from the official denominator: expected {not s.official.dropped}")
    if not s.robust.needs_judge and not _close(s.robust.value, careful["score"]):
        problems.append(f"careful {careful['score']} ({careful.get('why', '')}), robust {s.robust.value} "
                        f"(read {s.robust.extracted!r})")
    return f"{pair['_where']} {pair['id']} {pair['output'][:80]!r}: " + "; ".join(problems) if problems else None


@pytest.mark.skipif(not PAIRS, reason=f"no parity fixtures in {PARITY}")
@pytest.mark.parametrize("benchmark", sorted({b for b, _ in PAIRS}))
def test_official_and_robust_scores_match_the_golden_pairs(benchmark: str) -> None:
    mine = [p for b, p in PAIRS if b == benchmark]
    failures = [msg for p in mine if (msg := _check(benchmark, p))]
    assert not failures, f"{len(failures)}/{len(mine)} pairs disagree:\n" + "\n".join(failures)


# Where lmms-eval's port and the authors' own scorer differ, the card follows the official code the project cites
# (lmms-eval, which cuts closed <think> blocks first) and the authors' reading is a named protocol; its golden numbers
# (the authors' code run on the same pairs, raw output) sit beside: official.<key>.
VARIANTS = {"ovobench": ("ovobench", "authors_score")}


@pytest.mark.skipif(not PAIRS, reason=f"no parity fixtures in {PARITY}")
@pytest.mark.parametrize("benchmark,variant,key", sorted((b, v, k) for b, (v, k) in VARIANTS.items()))
def test_named_variant_matches_its_own_code_on_the_golden_pairs(benchmark: str, variant: str, key: str) -> None:
    mine = [p for b, p in PAIRS if b == benchmark and key in p["official"]]
    assert mine, f"no {key} numbers in {benchmark}.jsonl"
    assert get_benchmark(benchmark).protocol != variant
    wrong = []
    for p in mine:
        sample = parse_record(p["record"], benchmark=benchmark, index=0)
        got = score(sample, p["output"], protocol=variant).official.value
        if not _close(got, p["official"][key]):
            wrong.append(f"{p['id']}: {key} {p['official'][key]}, {variant} {got}")
    differ = sum(p["official"][key] != p["official"]["score"] for p in mine)
    assert not wrong and differ > 0, "\n".join(wrong) or "the variant never differs from the card's reading"


@pytest.mark.skipif(not PAIRS, reason=f"no parity fixtures in {PARITY}")
def test_ovobench_think_block_goldens_follow_lmms_eval() -> None:
    """Issue 39: a closed <think> block before the answer. lmms-eval (the card's code) cuts it, the authors' scorer
    reads the raw text: a letter named only while thinking is not credited, a count after the block is."""
    mine = [p for b, p in PAIRS if b == "ovobench" and p["id"].startswith("ovobench-i39-")]
    think_letter = [p for p in mine if p["form"] == "think_revised_letter_truth_in_think"]
    think_count = [p for p in mine if p["form"] == "num_think_then_count"]
    assert len(think_letter) == 10 and len(think_count) == 10
    for p in think_letter + think_count:
        got = _score("ovobench", p).official.value
        assert got == p["official"]["score"] != p["official"]["authors_score"], p["id"]
    assert {p["official"]["score"] for p in think_letter} == {0.0}
    assert {p["official"]["score"] for p in think_count} == {1.0}


AGGREGATES = json.loads((PARITY / "aggregates.json").read_text()) if (PARITY / "aggregates.json").is_file() else {}


@pytest.mark.skipif("mvbench" not in AGGREGATES, reason="no official aggregates")
def test_mvbench_aggregate_leaves_empty_predictions_out_as_lmms_eval() -> None:
    from vbench_async.results.readings import reading_lines

    golden = AGGREGATES["mvbench"]
    lines = []
    for b, p in PAIRS:
        if b == "mvbench":
            s = _score(b, p)
            lines.append({"sample_id": p["id"], "score": s.value, "error": None, "official": s.official.to_dict(),
                          "robust": s.robust.to_dict(), "fields": {"task": "action_sequence"}})
    agg = get_benchmark("mvbench").aggregate(reading_lines(lines, "official"))
    assert len(lines) == golden["n"] and agg["n_dropped"] == golden["n"] - golden["answered"]
    assert math.isclose(100 * agg["score"], golden["aggregate_percent"], abs_tol=1e-9)
    robust = get_benchmark("mvbench").aggregate(reading_lines(lines, "robust"))
    assert "n_dropped" not in robust and robust["n_scored"] == golden["n"]  # the careful reading counts empties as 0


def agreement() -> dict[str, dict[str, int]]:
    """Per benchmark: pairs, official agreements (documented differences counted apart), robust agreements."""
    table: dict[str, Counter] = {}
    for benchmark, pair in PAIRS:
        c = table.setdefault(benchmark, Counter())
        s = _score(benchmark, pair)
        c["pairs"] += 1
        marker = next((m for m in DOCUMENTED if pair["official"].get(m)), None)
        if marker:
            c["documented"] += 1
        elif _close(s.official.value, pair["official"]["score"]):
            c["official_agree"] += 1
        if s.robust.needs_judge:
            c["robust_needs_judge"] += 1
        else:
            c["robust_agree"] += _close(s.robust.value, pair["careful"]["score"])
    return {b: dict(c) for b, c in sorted(table.items())}


if __name__ == "__main__":  # python tests/test_scoring_parity.py: the agreement table for the report
    for name, row in agreement().items():
        print(name, row)
