"""Video-MMLU captioning track (open-compass/VLMEvalKit `vlmeval/dataset/video_mmlu.py`, `VideoMMLU_CAP.evaluate`;
prompts in `vlmeval/dataset/utils/video_mmlu.py`): the judge answers each of the video's reference questions from
the model's caption alone, then grades each answer against the reference answer with {'pred': yes/no, 'score':
0-5}. The item's value is the share of questions graded "yes" (the official `coarse_accuracy`); the mean 0-5
rating over the readable grades (`coarse_valid`) is kept in the verdict's info.

The questions are the release's per-video QA list (`fields.qa`: [{question, answer}, ...]); the unified file holds
only the reference caption, so there the item cannot be judged and says so. Differences: the official system
prompts are sent ahead of the prompt in the one user message; a grade is read with `json.loads` or
`ast.literal_eval` (the official code `eval`s it); and every question counts (the official CAP code keys its
grades by the video's row index, so one grade per video survives).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Sequence

from .base import NEEDS_FIELDS, UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome

SOURCE = "open-compass/VLMEvalKit vlmeval/dataset/video_mmlu.py (VideoMMLU_CAP.evaluate), utils/video_mmlu.py"

SYSTEM_ANSWER = """You are an intelligent chatbot designed for providing accurate answers to questions related to the \
content based on a detailed description of a video or image.
Here's how you can accomplish the task:
------
##INSTRUCTIONS: 
- Read the detailed description carefully.
- Answer the question only based on the detailed description.
- The answer should be a short sentence or phrase.
"""

ANSWER = """Please provide accurate answers to questions related to the content based on a detailed description of a \
video or image:

detailed description: {pred_cap}
question: {q}

DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only provide short but accurate answer."""

SYSTEM_GRADE = """
    You are an intelligent chatbot designed for evaluating the correctness of generative outputs for question-answer \
pairs. 
    Your task is to compare the predicted answer with the correct answer and determine if they match meaningfully. \
The evaluation criteria differ based on the type of question: 
    ------
    ## INSTRUCTIONS:
    1. For **OCR-related questions**:
       - Perform a strict letter-by-letter comparison.
       - Any difference in characters (including case, punctuation, or letter substitution) must result in 'no'.
       - Minor spelling errors or missing characters should not be accepted.
    2. For **non-OCR-related questions**:
       - Focus on the meaningful match between the predicted answer and the correct answer.
       - Synonyms or paraphrases can be considered valid matches.
       - Minor spelling differences or alternative expressions should not be penalized.
"""

GRADE = """Please evaluate the following video-based question-answer pair:\n\n
            Question: {question}\n
            Correct Answer: {answer}\n
            Predicted Answer: {pred_response}\n\n
            Provide your evaluation only as a yes/no and score where the score is an integer value between 0 and 5, \
with 5 indicating the highest meaningful match. 
            Please generate the response in the form of a Python dictionary string with keys 'pred' and 'score', \
where value of 'pred' is  a string of 'yes' or 'no' and value of 'score' is in INTEGER, not STRING.
            DO NOT PROVIDE ANY OTHER OUTPUT TEXT OR EXPLANATION. Only provide the Python dictionary string. 
                For example, your response should look like this: {{'pred': 'yes', 'score': 4.8}}."""


def qa_pairs(item: JudgeItem) -> list[tuple[str, str]] | None:
    qa = item.fields.get("qa")
    if isinstance(qa, str):
        try:
            qa = json.loads(qa)
        except ValueError:
            return None
    if not isinstance(qa, list):
        return None
    pairs = [(str(q.get("question", "")), str(q.get("answer", ""))) for q in qa if isinstance(q, dict)]
    return pairs or None


@dataclass(frozen=True)
class Grade:
    """One reference question's grade: the judge's yes/no and its 0-5 rating (None when the rating is not a number:
    the yes/no still counts, as in the official code)."""

    pred: str
    rating: float | None

    @property
    def yes(self) -> bool:
        return self.pred.lower() == "yes"


def parse_grade(reply: str) -> Grade | None:
    """The grade in the judge's reply ({'pred': 'yes'|'no', 'score': number}), or None."""
    text = reply.strip().strip("`").removeprefix("python").removeprefix("json").strip()
    for read in (json.loads, ast.literal_eval):
        try:
            value = read(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("pred"), str) and "score" in value:
            rating = value.get("score")
            return Grade(value["pred"], float(rating) if isinstance(rating, (int, float)) else None)
    return None


class VideoMMLUJudge(JudgeProtocol):
    name = "videommlu"
    source = SOURCE
    templates = {"system_answer": SYSTEM_ANSWER, "answer": ANSWER, "system_grade": SYSTEM_GRADE, "grade": GRADE}

    def start(self, item: JudgeItem) -> list[Ask] | Outcome:
        pairs = qa_pairs(item)
        if pairs is None:
            return Outcome.failed(NEEDS_FIELDS, "the caption is judged through the video's reference questions "
                                  "(fields.qa of Video_MMLU_CAP), which the unified file lacks")
        return [Ask(f"answer-{i}", ANSWER.format(pred_cap=item.output, q=q), max_tokens=64, system=SYSTEM_ANSWER,
                    context={"i": i}) for i, (q, _) in enumerate(pairs)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> list[Ask] | Outcome:
        pairs = qa_pairs(item) or []
        if asks[0].stage.startswith("answer"):
            return [Ask(f"grade-{a.context['i']}", GRADE.format(question=pairs[a.context["i"]][0],
                                                                 answer=pairs[a.context["i"]][1], pred_response=r),
                        max_tokens=32, system=SYSTEM_GRADE, context=a.context) for a, r in zip(asks, replies)]
        grades = [parse_grade(r) for r in replies]
        valid = [g for g in grades if g is not None]
        if not valid:
            return Outcome.failed(UNPARSABLE, "no readable {'pred', 'score'} grade", reply=replies[0][:200])
        yes = [g.yes for g in valid]
        ratings = [g.rating for g in valid if g.rating is not None]
        share = sum(yes) / len(yes)
        return Outcome(share, f"{sum(yes)}/{len(yes)} yes", None,
                       {"n_questions": len(pairs), "n_graded": len(valid),
                        "mean_rating": sum(ratings) / len(ratings) if ratings else None})
