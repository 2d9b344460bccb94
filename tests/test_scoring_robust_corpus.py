"""The robust reading reads like a careful person: a corpus of realistic outputs per answer kind with careful-grader
labels (tests/fixtures/robust_corpus.jsonl, written by tests/support/robust_corpus.py) on which it misgrades none,
and the classes of issue 29 with several phrasings each."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from vbench_async.samples import Sample, parse_record
from vbench_async.scoring import score

CORPUS = Path(__file__).resolve().parent / "fixtures" / "robust_corpus.jsonl"
LINES = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
KINDS = ("mc", "number", "span", "yes_no", "free_text")


def test_the_corpus_has_at_least_300_outputs_per_answer_kind() -> None:
    counts = Counter(line["kind"] for line in LINES)
    assert set(counts) == set(KINDS) and min(counts.values()) >= 300, counts


@pytest.mark.parametrize("kind", KINDS)
def test_the_robust_reading_misgrades_none_of_the_corpus(kind: str) -> None:
    wrong = []
    for line in (x for x in LINES if x["kind"] == kind):
        s = score(parse_record(line["record"], benchmark="corpus", index=0), line["output"]).robust
        if s.value is None or not math.isclose(s.value, line["careful"]["score"], abs_tol=1e-9):
            wrong.append(f"{line['id']} {line['output'][:70]!r}: careful {line['careful']['score']}, robust "
                         f"{s.value} (read {s.extracted!r})")
    assert not wrong, f"{len(wrong)} misgraded:\n" + "\n".join(wrong[:40])


# ------------------------------------------------------------------------------- the classes, phrasing by phrasing


def _sample(task_type: str, answer: str, options: tuple[str, ...] = (), **fields) -> Sample:
    return Sample(benchmark="t", sample_id="1", task_type=task_type, question="Q?", answer=f"<answer>{answer}</answer>",
                  options=options, fields=fields)


OPTIONS = ("A. a red cup", "B. a blue towel", "C. a wooden spoon", "D. a glass jar")


@pytest.mark.parametrize("output", [
    "B is incorrect. The correct one is D.", "B is wrong; the answer is D.", "Not B. The answer is D.",
    "B can be ruled out, so D.", "It can't be B, the right choice must be D.", "B isn't right. D is correct.",
])
def test_a_ruled_out_letter_is_not_the_answer(output: str) -> None:
    assert score(_sample("multiple choice", "D", OPTIONS), output).robust.value == 1.0


@pytest.mark.parametrize("output", ["B or D", "Either B or D.", "Both B and A seem possible.", "D or maybe B"])
def test_a_hedge_between_letters_gets_no_credit(output: str) -> None:
    assert score(_sample("multiple choice", "D", OPTIONS), output).robust.value == 0.0


@pytest.mark.parametrize("output", ["I'd pick B.", "I would go with B.", "I choose B", "I think it is B."])
def test_first_person_picks_read_the_letter(output: str) -> None:
    s = score(_sample("multiple choice", "B", OPTIONS), output, protocol="mvbench")
    assert s.robust.value == 1.0 and s.robust.extracted == "B"


@pytest.mark.parametrize("output,truth", [
    ("I count four chairs in total, though 2 are partly hidden.", 4),
    ("There are five cars (2 red, 3 blue).", 5),
    ("I see ten people, and 3 of them are moving.", 10),
    ("Seven birds appear, although 2 fly away early.", 7),
])
def test_a_count_in_words_beside_other_numbers(output: str, truth: int) -> None:
    assert score(_sample("counting", str(truth)), output).robust.value == 1.0


@pytest.mark.parametrize("output", ["The ratio is 1/2.", "It is 1/2 of the total.", "1/2", "Half: 1/2."])
def test_a_fraction_inside_a_sentence(output: str) -> None:
    assert score(_sample("numerical", "0.5"), output).robust.value == 1.0


@pytest.mark.parametrize("output", ["3 or 4", "Either 3 or 4.", "About 3 or 4 times.", "3 or maybe 4"])
def test_a_hedge_between_numbers_gets_no_credit(output: str) -> None:
    assert score(_sample("counting", "3"), output).robust.value == 0.0
    assert score(_sample("regression", "3"), output).robust.value == 0.0


@pytest.mark.parametrize("output,expected", [
    ("Absolutely.", "yes"), ("Definitely.", "yes"), ("Of course.", "yes"), ("I think so.", "yes"),
    ("It has been completed.", "yes"), ("I don't think so.", "no"), ("Absolutely not.", "no"),
    ("Not at all.", "no"), ("It has not been completed yet.", "no"), ("I do not believe so.", "no"),
])
def test_yes_and_no_said_in_words(output: str, expected: str) -> None:
    for task in ("boolean", "SSR"):
        for truth in ("Yes", "No"):
            s = score(_sample(task, truth), output).robust
            assert (s.value, s.extracted) == (1.0 if truth.lower() == expected else 0.0, expected)


@pytest.mark.parametrize("output", ["I'm not sure.", "Maybe.", "Yes and no.", "Possibly."])
def test_unsure_yes_no_gets_no_credit(output: str) -> None:
    assert score(_sample("boolean", "Yes"), output).robust.value == 0.0


@pytest.mark.parametrize("pred,truth,mra", [(5, 4, 0.5), (3, 4, 0.5), (4, 5, 0.6), (6, 5, 0.6), (4.2, 4, 0.9),
                                            (2, 4, 0.0), (11, 10, 0.8), (4, 4, 1.0)])
def test_mra_is_the_papers_strict_definition(pred: float, truth: float, mra: float) -> None:
    s = score(_sample("regression", str(truth), original_question_type="object_counting"), f"{pred:g}",
              protocol="vsibench")
    assert s.robust.value == mra
    assert score(_sample("regression", "4", original_question_type="object_counting"), "5",
                 protocol="vsibench").official.value == 0.6  # the official code's `<=` in floats


@pytest.mark.parametrize("output", [
    "It starts at 12.5 seconds and ends at 20 seconds.", "From 12.5 to 20 seconds.", "12.5 - 20",
    '{"time": [12.5, 20]}', "It begins at 12.5 s and finishes at 20 s.",
])
def test_spans_in_words_are_read(output: str) -> None:
    assert score(_sample("temporal grounding", '{"time": [12.5, 20.0]}'), output).robust.value == 1.0
