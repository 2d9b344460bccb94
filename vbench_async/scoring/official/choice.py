"""The official letter parsers, rule for rule (quirks included), each reimplemented from the benchmark's code.

Every function reads one already-stripped response and returns what the official code returns: a letter, "" (or
None) when it finds none. Callers decide what an empty result scores (0, or a seeded random guess).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence

_EDGE_PUNCT = (",", ".", "!", "?", ";", ":", "'")

# lmms-eval `_task_utils/mcq_extract.py`: answer phrases and the priority of each letter format.
_MCQ_PHRASES = (
    "the answer is", "answer is", "the correct answer is", "correct answer is", "the best answer is",
    "best answer is", "the correct option is", "correct option is", "the best option is", "best option is",
    "the choice is", "choice is", "the correct choice is", "correct choice is", "i choose", "i select", "i pick",
    "my answer is", "my choice is", "옵션", "정답은", "답은", "답:", "答案是", "答案为", "选", "答えは",
)
_MCQ_PRIORITY = {"start": 10, "end": 9, "phrase": 7, "parentheses": 6, "period": 5, "colon": 4, "right_paren": 3,
                 "space": 2, "fallback": 0}


def lmms_mcq_extract(response: str, choices: Sequence[str] = tuple("ABCDEFGH")) -> str:
    """lmms-eval's shared extractor: every (letter, position, format) candidate, best format first, then the last
    position. Case-sensitive: a lowercase "c" is never read."""
    if not response or not response.strip():
        return ""
    text = response.strip()
    for ch in (",", ".", "!", "?", ";", ":", "'", '"'):
        text = text.strip(ch)
    text = f" {text} "
    found: list[tuple[str, int, str]] = []
    for fmt, pattern in (("parentheses", "({})"), ("period", "{}."), ("colon", "{}:"), ("right_paren", "{})"),
                         ("space", "{} ")):
        for ch in choices:
            mark = pattern.format(ch)
            if mark in text:
                found.append((ch, text.rfind(mark), fmt))
    lower = text.lower()
    for phrase in _MCQ_PHRASES:
        at = lower.find(phrase)
        if at != -1:
            for ch in choices:
                pos = text.find(ch, at + len(phrase))
                if pos != -1:
                    found.append((ch, pos, "phrase"))
    stripped = text.strip()
    for ch in choices:
        if stripped.startswith(ch) and (len(stripped) == 1 or not stripped[1].isalpha()):
            found.append((ch, 0, "start"))
        if stripped.endswith(ch) and (len(stripped) == 1 or not stripped[-2].isalpha()):
            found.append((ch, len(text) - 1, "end"))
    if not found:
        found = [(ch, text.rfind(ch), "fallback") for ch in choices if ch in text]
    if not found:
        return ""
    return max(found, key=lambda c: (_MCQ_PRIORITY[c[2]], c[1]))[0]  # max keeps the first of equal keys, as sort


def mmmu_multi_choice(response: str, choices: Sequence[str], index2ans: Mapping[str, str]) -> str | None:
    """The MMMU-style parser (Video-Holmes): "(B)", then "B ", then "B.", then option text in a long answer; several
    candidates resolve to the last one. None when nothing matches (the official code then guesses)."""
    for ch in _EDGE_PUNCT:
        response = response.strip(ch)
    response = f" {response} "
    by_index, bracketed = True, False
    cands = [c for c in choices if f"({c})" in response]
    if cands:
        bracketed = True
    if not cands:
        cands = [c for c in choices if f"{c} " in response]
    if not cands:
        cands = [c for c in choices if f"{c}." in response]
    if not cands and len(response.split()) > 5:
        cands = [i for i, ans in index2ans.items() if ans.lower() in response.lower()]
        by_index = not cands
    if not cands:
        return None
    if len(cands) == 1:
        return cands[0]
    if by_index:
        marks = [response.rfind(f"({c})" if bracketed else f" {c} ") for c in cands]
    else:
        marks = [response.lower().rfind(index2ans[c].lower()) for c in cands]
    return cands[marks.index(max(marks))]  # numpy.argmax: the first maximum


_LVB_PREFIXES = ("The best answer is", "The correct answer is", "The answer is", "The answer", "The best option is",
                 "The correct option is", "Best answer:", "Best option:")
# VideoMathQA's copy concatenates two pairs of prefixes into single strings (a missing comma in the official list).
_VMQA_PREFIXES = ("The best answer is", "The correct answer is", "The answer is", "The answer",
                  "The best option isThe correct option is", "Best answer:Best option:")


def first_capital_letter(response: str, prefixes: Sequence[str]) -> str | None:
    """LongVideoBench / VideoMathQA: drop the answer prefixes, then the first capital A-E anywhere (so "Based on"
    reads as B). None for no letter, or for a long answer (over 10 words) with none."""
    s = response.strip()
    for prefix in prefixes:
        s = s.replace(prefix, "")
    m = re.search(r"[ABCDE]", s)
    return m.group(0) if m else None


def lvb_multi_choice(response: str) -> str | None:
    return first_capital_letter(response, _LVB_PREFIXES)


def videomathqa_letter(response: str) -> str:
    return first_capital_letter(response, _VMQA_PREFIXES) or ""


_MINERVA_EXPLICIT = re.compile(r"(?:answer|option)\s*(?:is|:)\s*([ABCDE])", re.I)
_MINERVA_PREFIXES = ("The best answer is", "The correct answer is", "The answer is", "Answer:", "Option:",
                     "Therefore, the final answer is:")


def minerva_letter(response: str) -> str:
    """MINERVA: the last "answer is X" / "option: X" (case-insensitive), else the last capital A-E after dropping
    the answer prefixes; "" when none (the official code then guesses)."""
    cleaned = str(response).strip()
    explicit = list(_MINERVA_EXPLICIT.finditer(cleaned))
    if explicit:
        return explicit[-1].group(1).upper()
    for prefix in _MINERVA_PREFIXES:
        cleaned = cleaned.replace(prefix, "")
    letters = re.findall(r"[ABCDE]", cleaned)
    return letters[-1] if letters else ""


_MOTION_PREFIXES = ("THE BEST ANSWER IS", "THE CORRECT ANSWER IS", "THE ANSWER IS", "BEST ANSWER:", "ANSWER:")


def motionbench_letter(response: str) -> str:
    """MotionBench: text after the last </think>, upper-cased, prefixes dropped; a standalone A-F, else "X." / "X)"
    / "X:", else any A-F (so any word with an a-f in it yields a letter)."""
    candidate = response.split("</think>")[-1] if "</think>" in response else response
    candidate = candidate.strip().upper()
    for prefix in _MOTION_PREFIXES:
        candidate = candidate.replace(prefix, "")
    for pattern in (r"\b([A-F])\b", r"([A-F])[.):]", r"([A-F])"):
        m = re.search(pattern, candidate)
        if m:
            return m.group(1)
    return ""


_PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")
_COMMA_STRIP = re.compile(r"(\d)(\,)(\d)")
_PUNCT = (";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")


def _mvbench_process(answer: str) -> str:
    m = re.match(r"^([A-E])\.\s*(.+)$", answer.strip(), re.I)
    if m:
        return m.group(1).upper()
    text = answer.replace("\n", " ").replace("\t", " ").strip()
    out = text
    for p in _PUNCT:
        if (p + " " in text or " " + p in text) or _COMMA_STRIP.search(text) is not None:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    out = _PERIOD_STRIP.sub("", out, 32)  # the official call passes re.UNICODE (32) as the count
    out = out.strip("'").strip('"').strip(")").strip("(").strip().lower()
    m = re.search(r"\b([A-E])\b", out, re.I)
    return m.group(1).upper() if m else out


def mvbench_correct(truth_letter: str, response: str) -> tuple[bool, str]:
    """MVBench `mcq_acc`: both sides through the same normaliser, then equality. Returns (correct, read)."""
    read = _mvbench_process(response)
    return read == _mvbench_process(truth_letter), read


def mmvu_choice_correct(response: str, truth: str, choices: Mapping[str, str]) -> bool:
    """MMVU's rule-based multiple-choice check: the first standalone letter, the truth letter standing alone
    anywhere, the truth's option text inside the response, or the truth letter plus one key word of its text."""
    pred = str(response).strip()
    m = re.search(r"\b([A-E])\b", pred, re.I)
    if m and m.group(1).upper() == truth.upper():
        return True
    if truth.upper() in pred.upper() and re.search(rf"\b{re.escape(truth)}\b", pred, re.I):
        return True
    if truth in choices:
        text, lower = choices[truth].strip().lower(), pred.lower()
        if text in lower:
            return True
        if truth.upper() in pred.upper():
            words = [w.strip(string.punctuation) for w in text.split() if len(w.strip(string.punctuation)) > 2]
            if words and any(w in lower for w in words):
                return True
    return False


def mmvu_choice_read(response: str) -> str | None:
    m = re.search(r"\b([A-E])\b", response)
    return m.group(1) if m else None
