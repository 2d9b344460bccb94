"""The project's own judge prompt, for open-ended items of benchmarks without a judging protocol of their own (the
demo cards, user cards): question, reference and answer in, CORRECT or INCORRECT out."""

from __future__ import annotations

import re
from typing import Sequence

from .base import UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, without_think

PROMPT_TEMPLATE = """You are grading an answer to a question about a video. You cannot see the video: judge only \
whether the model's answer means the same as the reference answer. Ignore wording, style and length; an answer that \
contradicts the reference, or leaves out its key fact, is incorrect.

Question:
{question}

Reference answer:
{reference}

Model's answer:
{answer}

Reply with one line: "VERDICT: CORRECT" or "VERDICT: INCORRECT"."""

_MARKED = re.compile(r"(?:verdict|judg(?:e)?ment|grade|answer)\s*[:=\-]?\s*\**\s*\"?\s*(in)?correct\b", re.I)
_JSON_VERDICT = re.compile(r"\"verdict\"\s*:\s*\"\s*(in)?correct\s*\"", re.I)
_BARE = re.compile(r"^\W*(incorrect|correct|wrong|right|yes|no|true|false|1|0)\W*$", re.I)
_WORDS = re.compile(r"\b(not\s+correct|incorrect|correct)\b", re.I)
_BARE_VALUES = {"correct": True, "right": True, "yes": True, "true": True, "1": True,
                "incorrect": False, "wrong": False, "no": False, "false": False, "0": False}


def judge_prompt(question: str, reference: str, answer: str) -> str:
    return PROMPT_TEMPLATE.format(question=question.strip(), reference=reference.strip(), answer=answer.strip())


def parse_verdict(text: str) -> bool | None:
    """True (correct), False (incorrect) or None (no clear verdict). Reasoning in <think> is ignored; the last
    explicit marker ("VERDICT: ...", {"verdict": ...}) wins; otherwise a bare one-word reply, otherwise the only
    verdict word used. Mixed or absent signals are None: a judge failure, never a guess."""
    text = without_think(text)
    for pattern in (_MARKED, _JSON_VERDICT):
        found = pattern.findall(text)
        if found:
            return not found[-1]
    bare = _BARE.match(text)
    if bare:
        return _BARE_VALUES[bare.group(1).lower()]
    words = {w.lower().split()[0] for w in _WORDS.findall(text)}  # "not correct" counts as a negative
    if words == {"correct"}:
        return True
    if words and words <= {"incorrect", "not"}:
        return False
    return None


def verdict_outcome(verdict: bool | None, reply: str, expected: str = "CORRECT/INCORRECT") -> Outcome:
    """A parsed verdict as an outcome; no verdict is a judge failure (the item keeps waiting), never a zero."""
    if verdict is None:
        return Outcome.failed(UNPARSABLE, f"no clear {expected} verdict", reply=reply[:200])
    return Outcome.of(verdict)


class GenericJudge(JudgeProtocol):
    name = "generic"
    source = "vbench-async's own prompt (no benchmark protocol)"
    templates = {"verdict": PROMPT_TEMPLATE}

    def start(self, item: JudgeItem) -> list[Ask]:
        return [Ask("verdict", judge_prompt(item.question, item.reference, item.output), max_tokens=32)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> Outcome:
        return verdict_outcome(parse_verdict(replies[0]), replies[0])
