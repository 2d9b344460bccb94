"""MMVU open-ended items (EvolvingLMMs-Lab/lmms-eval 0.7.3 `lmms_eval/tasks/mmvu/utils.py`,
`evaluate_with_llm_judge`): the rules run first (`scoring.official`, `mmvu_open_rule`); an answer they reject goes to
the judge with the strict 1/0 prompt below (the protocol itself, copied from `_get_pipeline`'s `custom_prompt`),
the question as `construct_question_prompt` writes it and the prediction with its reasoning blocks cut
(`StripReasoningExtractor`). Multiple-choice items are never judged.

The reply is read as lmms-eval's `parse_binary_response` reads it ("INCORRECT" anywhere is 0; "CORRECT", "yes",
"true", "1" anywhere is 1), except that a reply with none of them is a judge failure here (lmms-eval counts 0).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..official.common import strip_reasoning_tags
from .base import UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, without_think

SOURCE = "EvolvingLMMs-Lab/lmms-eval 0.7.3 lmms_eval/tasks/mmvu/utils.py (evaluate_with_llm_judge)"

JUDGE = """You are a strict evaluator assessing answer correctness. You must output 1 for fully correct answers and \
0 for any other case.

# Evaluation Rules for Open-Ended Questions
- The model prediction may contain reasoning, focus on extracting the final answer.
- Score 1 if the prediction matches the answer semantically, even if in different format.
- For mathematical notation, treat equivalent forms as correct (e.g., O(n²) = O(n^2), n² = n^2).
- Score 0 for partially correct answers or answers with extra incorrect information.
- Ignore minor differences in formatting, capitalization, or spacing.
- Treat numerical answers as correct if they match within reasonable precision.
- For questions requiring units, both value and unit must be correct.

Return only "1" or "0" with no additional text or formatting.

Question: {question}
Correct Answer: {ground_truth}
Model Prediction: {prediction}"""

_THINKING_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))


def judge_prompt(question: str, prediction: str, ground_truth: str) -> str:
    return JUDGE.format(question=f"Question: {question}", ground_truth=ground_truth,
                        prediction=strip_reasoning_tags(prediction, _THINKING_TAGS))


def parse_binary(reply: str) -> bool | None:
    text = without_think(reply)
    upper, lower = text.upper(), text.lower()
    if "INCORRECT" in upper or "NOT_ATTEMPTED" in upper:
        return False
    if "CORRECT" in upper:
        return True
    if any(sig in lower for sig in ("yes", "true", "1", "[1]")):
        return True
    return False if re.search(r"\b(0|no|false)\b", lower) else None


class MMVUJudge(JudgeProtocol):
    name = "mmvu"
    source = SOURCE
    templates = {"judge": JUDGE}

    def start(self, item: JudgeItem) -> list[Ask]:
        return [Ask("judge", judge_prompt(item.question, item.output, item.reference), max_tokens=8)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> Outcome:
        verdict = parse_binary(replies[0])
        if verdict is None:
            return Outcome.failed(UNPARSABLE, "no 1/0 verdict", reply=replies[0][:200])
        return Outcome.of(verdict)
