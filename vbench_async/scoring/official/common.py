"""What every official protocol shares: lmms-eval's reasoning-tag stripping, the seeded stand-in for the official
code's random guess, and the sample's truth in the form the official code reads it (letter, option texts, text)."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from ...samples import Sample
from ..letters import option_text, parse_choice
from ..tasks import _parse_text, ground_truth, valid_letters

# lmms-eval's CLI default `--reasoning_tags`: these blocks are cut before any task's process_results runs.
LMMS_REASONING_TAGS = (("<think>", "</think>"), ("<analysis>", "</analysis>"))


def strip_reasoning_tags(text: str, tag_pairs: Sequence[tuple[str, str]] = LMMS_REASONING_TAGS) -> str:
    """lmms-eval's post-processing: cut each closed block (case-sensitive, first opening to the next closing tag);
    a closing tag without any opening tag keeps only what follows its last occurrence; an unclosed opening tag
    stays in the text. The result is stripped."""
    result = text
    for start_tag, end_tag in tag_pairs:
        while start_tag in result and end_tag in result:
            start = result.find(start_tag)
            end = result.find(end_tag, start)
            if end == -1:
                break
            result = result[:start] + result[end + len(end_tag) :]
        if end_tag in result and start_tag not in result:
            result = result.rsplit(end_tag, 1)[-1]
    return result.strip()


def seeded_guess(sample: Sample, choices: Sequence[str]) -> str:
    """The official code's `random.choice(choices)` for an unreadable answer, drawn from a generator seeded by the
    sample's key so that a run is reproducible (the official code's own draw is not)."""
    seed = int.from_bytes(hashlib.sha256(sample.key.encode("utf-8")).digest()[:8], "big")
    return random.Random(seed).choice(list(choices))


def truth_letter(sample: Sample) -> str:
    """The ground truth's option letter, read as the robust scorer reads it (the truth is data, not output)."""
    letters = valid_letters(sample)
    return ground_truth(sample, lambda t, w: parse_choice(t, letters, sample.options, w), "an option letter")


def option_texts(sample: Sample) -> dict[str, str]:
    """letter -> option text without its "A." prefix, in option order."""
    return {letter: option_text(opt) for letter, opt in zip(sample.option_letters, sample.options, strict=False)}


def truth_text(sample: Sample) -> str:
    """The ground truth as plain text (answer tags and emphasis removed)."""
    return ground_truth(sample, _parse_text, "text", multiline=True)


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


def raw_truth_text(sample: Sample) -> str:
    """The ground truth as the release holds it: the unified file's `<answer>` wrapper removed, nothing else (no
    emphasis, quote, `$` or final-period cleaning), as official code that reads `doc["answer"]` sees it."""
    tags = _ANSWER_TAG.findall(sample.answer)
    return (tags[-1] if tags else sample.answer).strip()
