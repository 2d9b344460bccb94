"""TempCompass (EvolvingLMMs-Lab/lmms-eval 0.7.3 `lmms_eval/tasks/tempcompass/utils.py`): where the hand-written
rules of multi-choice, yes/no and caption matching fail (`scoring.official`), the judge sees the question as the
release writes it, the ground-truth answer and the prediction and replies "Correct" or "Incorrect"
(`get_eval_result`). Captioning is always judged: the judge answers the item's multiple-choice question
(`mc_question`) from the model's caption, and the item is right when that answer names the letter of `mc_answer`
and only one letter (`parse_llm_output_for_captioning`).

The prompt texts are the protocol itself, copied from the file above (their indentation included). Differences:
the official system prompt ("You are an AI assistant for question answering.") is sent ahead of the prompt in the
one user message; the official judge samples at temperature 1 (here the judge pass's own, greedy, settings); a
verdict reply with neither word is a judge failure (the official code retries, then counts 0).
"""

from __future__ import annotations

from typing import Sequence

from ..official.common import option_texts, strip_reasoning_tags, truth_letter
from ..official.protocols import _tempcompass_format
from .base import NEEDS_FIELDS, UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, correct_incorrect

SOURCE = "EvolvingLMMs-Lab/lmms-eval 0.7.3 lmms_eval/tasks/tempcompass/utils.py (get_eval_result, captioning)"
SYSTEM = "You are an AI assistant for question answering."

_RATE = """
        You will receive a {kind} question, the ground-truth answer and the prediction from a question answering \
(QA) model. \
        Your task is to determine whether QA model prediction is correct, based on the question and ground-truth \
answer. \
        If the prediction is correct, respond "Correct". If the prediction is incorrect, respond "Incorrect".
        """
RATE = {"multi-choice": (_RATE.format(kind="multi-choice"), "Multi-Choice Question"),
        "yes_no": (_RATE.format(kind="Yes/No"), "Yes/No Question"),
        "caption_matching": (_RATE.format(kind="caption matching"), "Caption Matching Question")}

CAPTIONING = """
    You will receive a video description and a multi-choice question. Your task is to choose the correct answer and \
briefly explain the reason why you choose the answer. \
    If none of the choice candidates are correct or the video description lacks enough information to answer the \
question, just answer "None of the choices are correct". \
    Please organize your response in this format:
    ```
    Reasoning: [Your reason to obtain the answer]
    Answer: [Your answer]
    ```

    Here are some examples of video description, multi-choice question and the expected answer:
    ```
    Video Description: A person is palying football.
    Multi-Choice Question:
    What is the person doing in the video?
    A. cooking
    B. palying football
    C. playing basketball
    D. reading book
    Reasoning: The video description mentions that the person is playing football.
    Answer: B. palying football

    Video Description: A bird is flying clockwise.
    Multi-Choice Question:
    In which direction is the bird flying?
    A. backwark
    B. counter-clockwise
    C. clockwise
    D. downward
    Reasoning: The video description mentions that the bird is flying clockwise
    Answer: C. clockwise

    Video Description: An air balloon is inflating.
    Multi-Choice Question:
    What is happening to the air balloon?
    A. exploding
    B. getting smaller
    C. flying
    Reasoning: The video description mentions that the air balloon is inflating, while none of the coices can be \
explained as inflating.
    Answer: None of the choices are correct
    ```
    """


def release_question(item: JudgeItem) -> tuple[str, str, str]:
    """(format, question, answer) as the release writes them: options embedded in the question, a multi-choice
    answer as "A. text", a caption-matching answer as its option line ("Caption A: text")."""
    sample = item.sample()
    fmt, label = _tempcompass_format(sample)
    if fmt == "yes_no" or not sample.options:
        return fmt, item.question, item.reference.lower()
    texts, letter = option_texts(sample), truth_letter(sample)
    if fmt == "caption_matching":
        lines = {k: f"{label or 'Caption'} {k}: {v}" for k, v in texts.items()}
        return fmt, "\n".join([item.question.split("\n")[0], *lines.values()]), lines[letter]
    question = "\n".join([item.question, *(f"{k}. {v}" for k, v in texts.items())])
    return "multi-choice", question, f"{letter}. {texts[letter]}"


def rating_prompt(fmt: str, question: str, answer: str, prediction: str) -> str:
    base, title = RATE[fmt]
    return f"{base}\n{title}:\n{question}\nGround-Truth Answer: {answer}\nModel Prediction: {prediction}"


def captioning_prompt(caption: str, mc_question: str) -> str:
    return f"{CAPTIONING}\nVideo Description:{caption}\nMulti-Choice Question:\n{mc_question}\nAnswer:"


def captioning_rating(reply: str, mc_answer: str) -> tuple[int, str | None]:
    """`parse_llm_output_for_captioning`: the last line naming "Answer" (else the whole reply) must start with the
    truth's letter and name exactly one of "A." to "D."; -1 for an empty reply."""
    if not reply:
        return -1, None
    answer = None
    for line in reply.split("\n"):
        line = line.strip()
        if "Answer" in line:
            answer = line.replace("Answer:", "").strip()
    answer = reply if answer is None else answer
    named = sum(answer.count(p) for p in ("A.", "B.", "C.", "D."))
    return int(answer.split(". ")[0] == mc_answer.split(". ")[0] and named == 1), answer


class TempCompassJudge(JudgeProtocol):
    name = "tempcompass"
    source = SOURCE
    templates = {"system": SYSTEM, "captioning": CAPTIONING, **{f"rate_{k}": v[0] for k, v in RATE.items()}}

    def start(self, item: JudgeItem) -> list[Ask] | Outcome:
        prediction = strip_reasoning_tags(item.output)
        fmt, question, answer = release_question(item)
        if fmt in RATE:
            return [Ask(f"rate_{fmt}", rating_prompt(fmt, question, answer, prediction), 128, SYSTEM)]
        mc_question, mc_answer = item.fields.get("mc_question"), item.fields.get("mc_answer")
        if not mc_question or not mc_answer:
            return Outcome.failed(NEEDS_FIELDS, "captioning is judged through the item's mc_question and mc_answer "
                                  "(the hub release's captioning fields), which the record lacks")
        return [Ask("captioning", captioning_prompt(prediction, str(mc_question)), 128, SYSTEM)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> Outcome:
        reply = replies[0]
        if asks[0].stage == "captioning":
            rating, answer = captioning_rating(reply.strip(), str(item.fields.get("mc_answer")))
            if rating < 0:
                return Outcome.failed(UNPARSABLE, "empty reply")
            return Outcome.of(bool(rating), judge_answer=(answer or "")[:200])
        verdict = correct_incorrect(reply)
        if verdict is None:
            return Outcome.failed(UNPARSABLE, 'no "Correct"/"Incorrect" verdict', reply=reply[:200])
        return Outcome.of(verdict)
