"""Option letters (A-J) for multiple choice: the extraction step that must never read "a" or "I" as a letter."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..samples import OPTION_PREFIX
from .answer_extraction import clean_answer, normalize_text

_LETTERS = "ABCDEFGHIJ"
# Words after a leading "A" / "I" that show it is an option letter ("A because ...", "A is correct").
_CONNECTIVES = {
    "because",
    "since",
    "as",
    "is",
    "was",
    "which",
    "seems",
    "would",
    "should",
    "will",
    "being",
    "fits",
    "matches",
    "appears",
}
_CONJUNCTIONS = {"and", "or", "nor", "vs", "versus"}
_LONE_LETTER = re.compile(r"^[\(\[]?([A-Ja-j])[\)\]]?[.:：)]?$")
_LETTER_DELIM = re.compile(r"^(?:[\(\[]([A-J])[\)\]]|([A-J])\s*[.:：),])(?:\s+(.*)|$)", re.S)
_LETTER_SPACE = re.compile(r"^([A-J])(?:\s+(.*))?$", re.S)
_OPTION_PREFIX = OPTION_PREFIX
_LEAD_WORDS = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+|best\s+|final\s+|right\s+)?(?:answer|option|choice)\s*(?:is\b)?\s*[:：]?\s*)+", re.I
)
_KW = r"(?i:answer|option|choice)"
_LETTER_PHRASES = [
    # "answer B", "answer: B", "the option is B"; a bare "option B" only names an option under discussion
    re.compile(r"\b(?i:answer)\s*(?i:is|would\s+be|should\s+be)?\s*[:：]?\s*(?i:option\s*)?[\(\[]?([A-J])[\)\]]?(?![\w'’])"),
    re.compile(r"\b(?i:option|choice)\s*(?:(?i:is|would\s+be|should\s+be)\s*[:：]?|[:：])\s*[\(\[]?([A-J])[\)\]]?(?![\w'’])"),
    re.compile(r"\b(?i:choose|select|pick|go\s+with|i['’]?d\s+say|i\s+would\s+say|the\s+video\s+(?:clearly\s+)?shows)"
               r"\s+(?i:option\s+|answer\s+)?[\(\[]?([A-J])[\)\]]?(?![\w'’])"),
    re.compile(r"(?<![\w'’])[\(\[]?([A-J])[\)\]]?\s+(?i:is\s+(?:the\s+)?(?:correct|right|best))\b"),
    # "the correct one is D", "the right choice must be D"
    re.compile(r"\b(?i:correct|right|best|true)\s+(?i:one|option|choice|pick)\s+(?i:is|would\s+be|must\s+be|should\s+be)"
               r"\s*[:：]?\s*[\(\[]?([A-J])[\)\]]?(?![\w'’])"),
    re.compile(r"(?:答案|选项?)\s*(?:是|为)?\s*[:：]?\s*([A-J])"),
    re.compile(r"\*\*\(?([A-J])\)?\*\*"),
    re.compile(r"\(([A-J])\)"),
]
# Marks that also serve to list options: several different letters in them means options discussed, not chosen.
_LISTING = (_LETTER_PHRASES[-2], _LETTER_PHRASES[-1])
_STANDALONE = re.compile(r"(?<![\w'’])([A-J])(?![\w'’])")
# A letter that is ruled out ("B is incorrect", "not B", "B can be eliminated") is no answer.
_NEGATED_AFTER = re.compile(
    r"^[\)\]]?\s*(?:(?i:is|seems|looks)\s+(?:(?i:clearly|definitely)\s+)?(?i:incorrect|wrong|false|not\b|out\b)"
    r"|(?i:isn['’]t|can\s+be\s+(?:ruled\s+out|eliminated|excluded)|cannot\s+be|can['’]t\s+be|is\s+ruled\s+out))")
_NEGATED_BEFORE = re.compile(r"(?i:\bnot|\bn['’]t\s+be|\brule\s+out|\beliminate|\bexclude)\s*(?i:option\s+)?[\(\[]?$")
# "B or C", "B/C", "B and C": a hedge between letters names no answer.
_ALTERNATIVE = re.compile(
    r"^[\)\]]?\s*(?:,|/|(?i:\bor\b|\band\b|\bvs\.?|\bversus\b))\s*(?:(?i:option)\s+)?[\(\[]?[A-J](?![\w'’])")


def option_text(option: str) -> str:
    """An option's text without its "A." / "A:" / "(A)" prefix."""
    return _OPTION_PREFIX.sub("", option, count=1).strip()


def _next_word(rest: str) -> str | None:
    m = re.match(r"\s*([A-Za-z]+)", rest)
    return m.group(1) if m else None


def _looks_like_article(letter: str, rest: str) -> bool:
    """ "A man ..." / "I think ..." / "A or B": the capital is an article, a pronoun, or one of several letters."""
    if letter not in ("A", "I"):
        return False
    word = _next_word(rest)
    return bool(word) and word.islower() and word not in _CONNECTIVES


def _without_article(text: str) -> str:
    return re.sub(r"^(?:a|an|the) ", "", normalize_text(text))


def _letter_for_text(text: str, letters: Sequence[str], options: Sequence[str]) -> str | None:
    """The letter whose option text equals `text` (normalised, leading article ignored), if exactly one does."""
    norm = _without_article(text)
    if not norm:
        return None
    hits = [letter for letter, opt in zip(letters, options, strict=False) if _without_article(option_text(opt)) == norm]
    return hits[0] if len(hits) == 1 else None


def _leading_letter(text: str, letters: Sequence[str], options: Sequence[str]) -> str | None:
    """A letter that opens the answer: "B", "(B)", "b", "B. ketose", "B: text", "(B) text", "B because ..."."""
    m = _LONE_LETTER.match(text)
    if m:
        return m.group(1).upper()
    m = _LETTER_DELIM.match(text)
    if m:
        letter_end = m.end(1) if m.group(1) else m.end(2)
        return None if _ALTERNATIVE.match(text[letter_end:]) else m.group(1) or m.group(2)
    m = _LETTER_SPACE.match(text)
    if m:
        letter, rest = m.group(1), m.group(2) or ""
        if letter not in letters or _NEGATED_AFTER.match(" " + rest):  # "I would ...", "B is incorrect"
            return None
        if options and letter in letters:
            opt = options[list(letters).index(letter)]
            if normalize_text(rest) == normalize_text(option_text(opt)):
                return letter
        if (_next_word(rest) or "").lower() in _CONJUNCTIONS:
            return None
        if not _looks_like_article(letter, rest):
            return letter
    return None


def _phrase_letter(text: str) -> str | None:
    """The last letter named by an explicit phrase ("answer is B", "choose C", "(D)", "**E**", "F is correct")."""
    best: tuple[int, str] | None = None
    for pattern in _LETTER_PHRASES:
        matches = list(pattern.finditer(text))
        if pattern in _LISTING and len({m.group(1) for m in matches}) > 1:
            continue
        for m in matches:
            if _looks_like_article(m.group(1), text[m.end() :]) or _ALTERNATIVE.match(text[m.end(1) :]):
                continue
            if best is None or m.start(1) > best[0]:
                best = (m.start(1), m.group(1))
    return best[1] if best else None


def _unique_letter(text: str, letters: Sequence[str]) -> str | None:
    """The one valid option letter standing alone in a short text ("I think B"); None if none or several."""
    found = set()
    for m in _STANDALONE.finditer(text):
        letter, rest = m.group(1), text[m.end() :]
        if letter not in letters or _NEGATED_AFTER.match(rest) or _NEGATED_BEFORE.search(text[: m.start()]):
            continue
        after_conjunction = re.search(r"\b(?:and|or|nor)\s+$", text[: m.start()], re.I)  # "B and A seem ..."
        if (_looks_like_article(letter, rest) and not after_conjunction
                and (_next_word(rest) or "") not in _CONJUNCTIONS):
            continue
        found.add(letter)
    return found.pop() if len(found) == 1 else None


def _answer_line(line: str, letters: Sequence[str], options: Sequence[str]) -> str | None:
    t = _LEAD_WORDS.sub("", clean_answer(line)).strip()
    if not t:
        return None
    if len(t) > 80:  # a long line counts only as "B) <long text>" (a delimited letter) or as an option's text
        m = _LETTER_DELIM.match(t)
        return (m.group(1) or m.group(2)) if m else _letter_for_text(t, letters, options)
    return _leading_letter(t, letters, options) or _letter_for_text(t, letters, options)


def parse_choice(
    text: str, letters: Sequence[str] = tuple(_LETTERS), options: Sequence[str] = (), whole_text: bool = False
) -> str | None:
    """An option letter (A-J) from one candidate answer, or None.

    Never reads an English article or pronoun as a letter ("the answer is a dog", "A man ...", "I think ...").
    `letters` are the sample's valid letters, `options` its option strings (so "ketose" or "B ketose" maps to B).
    With `whole_text` (the candidate is the whole output, not an explicit answer) the answer phrases are searched,
    then the first line and the last five lines bottom-up.
    """
    letter = _answer_line(text, letters, options)
    if letter:
        return letter
    letter = _phrase_letter(text)
    if letter:
        return letter
    if whole_text:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        for line in lines[:1] + lines[-5:][::-1]:
            letter = _answer_line(line, letters, options)
            if letter:
                return letter
    t = _LEAD_WORDS.sub("", clean_answer(text)).strip()
    if len(t.split()) <= 12:
        return _unique_letter(t, letters)
    return None
