"""The official protocols, quirks included: each case is what the benchmark's own code does with the output (read
off that code; the golden parity fixtures check the same against the code itself). Also the Score API, the seeded
guesses and the cards' `official` field."""

from __future__ import annotations

import pytest

from vbench_async.benchmarks import get_benchmark, list_benchmarks
from vbench_async.benchmarks.cards import PARITY_STATUSES, parse_card
from vbench_async.errors import UserError
from vbench_async.samples import parse_record
from vbench_async.scoring import PROTOCOLS, Reading, Score, score
from vbench_async.scoring.official.common import strip_reasoning_tags

OPTS4 = ["A. a red ball", "B. a chair", "C. a dog", "D. a cat"]


def mc(answer: str, options=OPTS4, **fields) -> dict:
    return {"problem": "q", "problem_type": "multiple choice", "options": options, "problem_id": "s1",
            "solution": f"<answer>{answer}</answer>", **fields}


CASES = [
    # (protocol, record, output, official value, official extracted)
    ("videomme", mc("C"), "(C)", 1.0, "C"),
    ("videomme", mc("C"), "The answer is C.", 1.0, "C"),
    ("videomme", mc("C"), "c", 0.0, None),  # lowercase letters are never read
    ("videomme", mc("C"), "<think>A or B?</think>C", 1.0, "C"),  # lmms-eval's CLI cut the closed think block
    ("lvbench", mc("B"), "I think B", 1.0, "B"),
    ("mlvu", mc("E", [*OPTS4, "E. a bird"]), "E", 0.0, None),  # A-D only: MLVU-test's E answers are never credited
    ("mvbench", mc("A"), "a dog", 1.0, "A"),  # the lone "a" is read as option A
    ("mvbench", mc("C"), "(C) a dog", 1.0, "C"),
    ("longvideobench", mc("B"), "Based on the video, C", 1.0, "B"),  # first capital A-E: the B of "Based"
    ("videomathqa", mc("B"), "Based on the video, C", 1.0, "B"),
    ("minerva", mc("C", [*OPTS4, "E. a bird"]), "the answer is c", 1.0, "C"),  # explicit phrase, any case
    ("motionbench", mc("C"), "Cannot tell", 1.0, "C"),  # any A-F letter of the upper-cased text
    ("mmvu", mc("C"), "The answer is (c)", 1.0, None),
    ("mmvu", mc("C"), "It is a dog", 1.0, None),  # the truth's option text inside the response
    ("vsibench", mc("C"), "(C)", 0.0, "(C)"),  # first token must be the letter itself
    ("vsibench", mc("C"), "c.", 1.0, "c"),
    ("holmes", mc("B", ["A. x", "B. y", "C. z", "D. w", "E. v", "F. u"]), "(B) y", 1.0, "B"),
    ("ovobench", mc("A", ovo_task="EPM"), "B. A dog", 1.0, "A"),  # the truth letter as a substring
    ("ovobench", {"problem": "q", "problem_type": "SSR", "solution": "<answer>No</answer>", "ovo_task": "SSR",
                  "ovo_type": 0}, "Not sure", 1.0, "Not sure"),  # "No" is a substring of "Not sure"
    ("charades_sta", {"problem": "q", "problem_type": "temporal grounding",
                      "solution": '{"time": [28.4, 35.0]}'}, "[28.4, 35]", 0.0, None),  # lists are not read
    ("charades_sta", {"problem": "q", "problem_type": "temporal grounding",
                      "solution": '{"time": [28.4, 35.0]}'}, "The event happens in 28.4 - 35 seconds.", 1.0,
     "[28.4, 35]"),
    ("vsibench", {"problem": "q", "problem_type": "regression", "solution": "<answer>3</answer>",
                  "original_question_type": "object_counting"}, "three chairs", 1.0, "3"),
    ("videommmu", mc("B"), "B", 1.0, "B"),
    ("longvideoreason", mc("B"), "<think>...</think><answer>B</answer>", 1.0, None),
    ("tempcompass", mc("A"), "A. a red ball", 1.0, "A. a red ball"),
]


@pytest.mark.parametrize("protocol,record,output,value,extracted", CASES)
def test_official_protocols(protocol, record, output, value, extracted):
    s = score(record, output, protocol=protocol)
    assert s.official.value == value, s.official
    if extracted is not None:
        assert s.official.extracted == extracted


def test_unreadable_answers_get_a_seeded_guess_where_the_official_code_guesses():
    record = mc("B")
    for protocol in ("longvideobench", "minerva"):
        first = score(record, "no idea", protocol=protocol).official
        assert first.guessed and first.extracted in "ABCDE"
        assert score(record, "no idea", protocol=protocol).official == first  # reproducible
    assert not score(record, "no idea", protocol="videomme").official.guessed  # Video-MME scores 0 instead


def test_rules_that_fail_leave_the_official_value_to_a_judge():
    s = score(mc("A"), "I would say the ball", protocol="tempcompass")
    assert s.official == Reading(None, "I would say the ball", needs_judge=True)
    assert score(mc("A"), "A", protocol="judge").official.needs_judge


def test_none_protocol_leaves_the_official_reading_empty():
    s = score(mc("B"), "B", protocol="none")
    assert s.official == Reading(None, None) and s.robust == Reading(1.0, "B") and not s.differs


def test_livesports_compares_the_first_character_and_vrb_needs_its_label():
    assert score(mc("D"), "D) a cat", protocol="livesports").official.value == 1.0
    assert score(mc("D"), "(D)", protocol="livesports").official.value == 0.0
    assert score(mc("D"), "", protocol="livesports").official == Reading(0.0, None)
    vrb = {"problem": "q", "problem_type": "open-ended", "solution": "<answer>cup2</answer>"}
    assert score(vrb, "final answer: cup2", protocol="videoreasonbench").official == Reading(0.0, None)
    s = score(vrb, "Final Answer: cup2", protocol="videoreasonbench")
    assert s.official.needs_judge and s.robust.needs_judge and s.robust.value is None and s.value > 0


def test_score_api_and_serialisation():
    s = score(mc("C"), "The answer is c", protocol="videomme")
    assert isinstance(s, Score) and s.value == s.robust.value == 1.0 and s.official.value == 0.0 and s.differs
    d = s.to_dict()
    assert d["official"] == {"value": 0.0, "extracted": None, "guessed": False, "needs_judge": False}
    assert d["robust"] == {"value": 1.0, "extracted": "C", "guessed": False, "needs_judge": False}
    assert d["details"]["protocol"] == "videomme"
    with pytest.raises(ValueError, match="unknown official protocol"):
        score(mc("C"), "C", protocol="nope")


def test_strip_reasoning_tags_like_lmms_eval():
    assert strip_reasoning_tags("<think>x</think> B") == "B"
    assert strip_reasoning_tags("reasoning</think>B") == "B"  # the template opened the tag
    assert strip_reasoning_tags("<think>cut off B") == "<think>cut off B"  # unclosed: left as is


def test_every_benchmark_card_names_its_official_protocol_and_source():
    real = [b for b in list_benchmarks() if not get_benchmark(b).card.synthetic]
    assert len(real) == 22
    for bid in real:
        official = get_benchmark(bid).card.official
        assert official is not None, bid
        assert official.protocol in PROTOCOLS and official.source and official.parity in PARITY_STATUSES, bid


def test_card_loader_rejects_an_unknown_protocol_or_a_parity_without_reason():
    base = {"id": "x", "name": "X", "sources": {"demo": "mc"}, "task_types": ["multiple choice"],
            "prompt": "multiple_choice", "metric": "accuracy"}
    with pytest.raises(UserError, match="unknown protocol"):
        parse_card({**base, "official": {"protocol": "lmms", "source": "a/b c.py", "parity": "exact"}})
    with pytest.raises(UserError, match="needs a note"):
        parse_card({**base, "official": {"protocol": "videomme", "source": "a/b c.py", "parity": "judge"}})
    card = parse_card({**base, "official": {"protocol": "videomme", "source": "a/b c.py", "parity": "exact"}})
    assert card.official.protocol == "videomme"


def test_benchmark_scores_with_its_card_protocol():
    bench = get_benchmark("videomme")
    sample = parse_record(mc("C"), "videomme", 0)
    s = bench.score(sample, "c")
    assert s.official.value == 0.0 and s.robust.value == 1.0
    from vbench_async.benchmarks import score_sample

    assert score_sample(sample, "c") == s


def test_docs_table_of_record_has_a_full_row_per_benchmark():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "scoring.md").read_text(encoding="utf-8")
    table = text.split("## Table of record", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| ---")][1:]
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.strip().strip("|").split("|")] for r in rows}
    real = [get_benchmark(b).card for b in list_benchmarks() if not get_benchmark(b).card.synthetic]
    assert sorted(cells) == sorted(c.name for c in real)
    for card in real:
        row = cells[card.name]
        assert len(row) == 7 and all(row), f"{card.name}: {row}"
        assert row[-1].startswith(card.official.parity), f"{card.name}: {row[-1]!r} vs card {card.official.parity!r}"
