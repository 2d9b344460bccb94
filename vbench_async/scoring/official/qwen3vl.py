"""The Qwen3-VL repository's Video-MME answer rule (QwenLM/Qwen3-VL@96588727 `evaluation/VideoMME`), rule for rule.

`run_videomme.py` keeps the text after the last `</think>` (stripped); `eval_utils.py` `can_infer` then reads it: a
single option letter as a token, else a single option text inside the reply. What it cannot read goes to the
script's GPT judge (the caller's `needs_judge`); a refusal or a lone "Z" is the rule's own "Z", wrong without a judge.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

REFUSED = "Z"  # the rule's verdict for a refusal: never an option, so scored 0 by the rule itself
_REFUSALS = ("Sorry, I can't help with images of people yet.", "I can't process this file.",
             "I'm sorry, but without the image provided", "Cannot determine the answer")
_API_FAILURE = "Failed to obtain answer via API"
_BLANKED = ".()[],:;!*#{}"  # replaced by spaces before the reply is split into tokens


def final_text(output: str) -> str:
    """What the script stores as the prediction: the text after the last `</think>`, stripped."""
    return output.split("</think>")[-1].strip()


def option_choices(options: Sequence[str]) -> dict[str, str]:
    """The script's `choices`: letter -> the option line after its first "." (`choice.split(".", 1)[1].strip()`),
    lettered by position; an option without a "." keeps its whole text (the script would raise on it)."""
    return {letter: (opt.split(".", 1)[1] if "." in opt else opt).strip()
            for letter, opt in zip(string.ascii_uppercase, options)}


def can_infer(answer: str, choices: Mapping[str, str]) -> str | None:
    """`can_infer`: an option letter, "Z" (refused), or None where the script would ask its judge."""
    return _by_letter(answer, choices) or _by_text(answer, choices)


def _by_letter(answer: str, choices: Mapping[str, str]) -> str | None:
    if _API_FAILURE in answer:
        return None
    if any(refusal in answer for refusal in _REFUSALS):
        return REFUSED
    for ch in _BLANKED:
        answer = answer.replace(ch, " ")
    tokens = answer.split()
    named = [c for c in choices if c in tokens]
    if len(named) == 1:
        # The script returns nothing as soon as "A" is a token of a reply longer than 3 tokens (the article "A"),
        # even when the letter named is another one.
        return None if "A" in tokens and len(tokens) > 3 else named[0]
    if not named and REFUSED in tokens:  # its count over {"Z", ""}: "" is never a token
        return REFUSED
    return None


def _by_text(answer: str, choices: Mapping[str, str]) -> str | None:
    """The one option whose text (lowercased, as it is: a final "." included) is inside the lowercased reply."""
    lowered = answer.lower()
    found = [k for k, text in choices.items() if text.lower() in lowered]
    return found[0] if len(found) == 1 else None
