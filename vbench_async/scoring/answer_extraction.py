"""Answer extraction: named, reusable steps that turn a model output (or a ground-truth string) into answers.

Two layers:
- `candidates(text)` yields the places an answer may sit, most explicit first: the last `<answer>` tag, a
  `\\boxed{}`, a "final answer is ..." phrase, the whole text outside `<think>`, and last the thinking itself.
- Per-form parsers (`parse_number`, `parse_yes_no`, `json_objects`, ... and `letters.parse_choice`) read one
  candidate.
Scorers try the candidates in order and keep the first one their parser accepts, so one cascade serves every
task type and ground truths go through exactly the same code as predictions.

Every function here is pure and total: any string in, no exception out.
"""

from __future__ import annotations

import ast
import json
import math
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

# ----------------------------------------------------------------------------------------------- regions

_THINK_OPEN = re.compile(r"<(?:think|thought|thinking)>", re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thought|thinking)\s*>", re.I)
_ANSWER_OPEN = re.compile(r"<answer>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.I)
_JUNK_TOKEN = re.compile(r"<\[[A-Za-z0-9_]*\]>|<\|[a-z_]+\|>")  # "<[PLHD21_never_used_...]>", "<|im_end|>"
_PHRASE = re.compile(
    r"(?:\b(?:final|correct|best|right)\s+answer|\bthe\s+answer|\banswer|\bfinal\s+choice|答案)"
    r"\s*(?:is\b|would\s+be\b|should\s+be\b|will\s+be\b|[:：]|是|为)\s*[:：]?[ \t]*",
    re.I,
)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def split_think(text: str) -> tuple[str, list[str]]:
    """Split an output into (body, thinking blocks).

    `<think>/<thought>/<thinking>` blocks are cut out (each opening tag pairs with the next closing tag). A closing
    tag with no opening one (the chat template opened it in the prompt) makes everything before it thinking. An
    opening tag that is never closed marks a truncated output: its text is neither body nor a thinking block (a
    cut-off chain of thought that merely names options earns nothing), except a complete `<answer>...</answer>`
    inside it. Junk placeholder tokens (e.g. `<[PLHD21_never_used_...]>`) are removed. Linear time.
    """
    tags = sorted(
        [(m.start(), m.end(), True) for m in _THINK_OPEN.finditer(text)]
        + [(m.start(), m.end(), False) for m in _THINK_CLOSE.finditer(text)]
    )
    parts: list[str] = []
    thinks: list[str] = []
    pos, opened = 0, None
    for start, end, is_open in tags:
        if is_open and opened is None:
            opened = (start, end)
        elif not is_open and opened is not None:
            parts.append(text[pos : opened[0]])
            thinks.append(text[opened[1] : start])
            pos, opened = end, None
    if opened is not None:  # unclosed: truncated thinking; keep only a finished answer tag written inside it
        parts.append(text[pos : opened[0]])
        tail = text[opened[1] :]
        tag_open = list(_ANSWER_OPEN.finditer(tail))
        if tag_open and _ANSWER_CLOSE.search(tail, tag_open[-1].end()):
            parts.append(tail[tag_open[-1].start() :])
    else:
        parts.append(text[pos:])
    body = "\n".join(parts)
    closes = list(_THINK_CLOSE.finditer(body))
    if closes:
        thinks.insert(0, _THINK_OPEN.sub(" ", body[: closes[-1].start()]))
        body = body[closes[-1].end() :]
    body = _THINK_OPEN.sub(" ", body)
    body = _JUNK_TOKEN.sub(" ", body)
    return body.strip(), [t.strip() for t in thinks if t.strip()]


def answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>`; an unclosed last `<answer>` (cut-off output) runs to the end."""
    opens = [m for m in _ANSWER_OPEN.finditer(text)]
    if not opens:
        return None
    closes = [m for m in _ANSWER_CLOSE.finditer(text) if m.start() >= opens[0].end()]
    last_open = opens[-1]
    if not closes or closes[-1].start() < last_open.end():
        return text[last_open.end() :].strip()  # unclosed
    close = closes[-1]
    start = max(m.end() for m in opens if m.end() <= close.start())
    return text[start : close.start()].strip()


def has_answer_tag(text: str) -> bool:
    return _ANSWER_OPEN.search(text) is not None


def boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (braces balanced, within 2,000 characters), or None."""
    starts = [m.end() for m in _BOXED.finditer(text)][-50:]
    for start in reversed(starts):
        end = _balanced_end(text, start - 1, limit=2001)  # from the opening brace the pattern ends with
        if end is not None:
            return text[start:end - 1].strip()
    return None


def final_phrase(text: str, multiline: bool = False) -> str | None:
    """What follows the last "final answer is:", "the answer is", "Answer:", "答案是" ... .

    Only to the end of that line (trailing reasoning on later lines is not part of the answer), or to the end of
    the text with `multiline` (free-form answers that span lines). If the rest of the line is empty, the next
    non-empty line is taken.
    """
    matches = list(_PHRASE.finditer(text))
    for m in reversed(matches):
        rest = text[m.end() :]
        if multiline:
            value = rest.strip()
        else:
            lines = [ln.strip() for ln in rest.split("\n")]
            value = lines[0] if lines[0] else next((ln for ln in lines[1:] if ln), "")
        if value:
            return value
    return None


@dataclass(frozen=True)
class Candidate:
    source: str  # "answer_tag", "boxed", "phrase", "text" or "think": the step that found it
    text: str


def candidates(text: str, multiline: bool = False, think: bool = True) -> Iterator[Candidate]:
    """Where the answer may be, most explicit first (see the module docstring). Duplicates are skipped. With
    `think` False the thinking blocks are not candidates."""
    if not isinstance(text, str):
        return
    body, thinks = split_think(text)
    seen: set[str] = set()

    def emit(source: str, value: str | None) -> Iterator[Candidate]:
        if value is not None:
            value = value.strip()
            if value and value not in seen:
                seen.add(value)
                yield Candidate(source, value)

    tag = answer_tag(body)
    if tag is not None:
        yield from emit("answer_tag", boxed(tag))
        yield from emit("answer_tag", final_phrase(tag, multiline))
        yield from emit("answer_tag", tag)
    yield from emit("boxed", boxed(body))
    yield from emit("phrase", final_phrase(body, multiline))
    yield from emit("text", body)
    for block in reversed(thinks) if think else ():
        yield from emit("think", answer_tag(block))
        yield from emit("think", final_phrase(block, multiline))
        yield from emit("think", block)


# ------------------------------------------------------------------------------------------- plain text


def clean_answer(text: str) -> str:
    """Strip markdown emphasis, code ticks, surrounding quotes/brackets and trailing punctuation."""
    t = re.sub(r"[*`]+", "", text).strip()
    t = t.strip("\"'“”‘’").strip().strip("$").strip()
    return t.rstrip(string.whitespace + ".。!！")


def normalize_text(text: str) -> str:
    """Lower-case, punctuation to spaces, whitespace collapsed: for comparing option texts and short answers."""
    t = text.lower()
    t = re.sub(r"[^\w\s]", " ", t)
    return " ".join(t.split())


# -------------------------------------------------------------------------------------------------- numbers

NUMBER_PATTERN = r"[-+−]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
# a fraction may end a sentence ("The ratio is 1/2."): only a digit or a decimal part after it breaks it
_NUMBER = re.compile(rf"(?<![\w.]){NUMBER_PATTERN}(?:\s*/\s*\d+(?!\d|\.\d))?(?:\s*%)?")
_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "none": 0,
    "once": 1,
    "twice": 2,
    "thrice": 3,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_DIGIT_WORDS = "one|two|three|four|five|six|seven|eight|nine"
_WORD_NUMBER = re.compile(rf"\b(?:({'|'.join(_TENS)})(?:[-\s]({_DIGIT_WORDS}))?|({'|'.join(_UNITS)}))\b", re.I)


@dataclass(frozen=True)
class Number:
    value: float
    percent: bool  # written with "%"
    decimals: int  # digits after the decimal point as written (precision of a ground truth)
    text: str


def to_number(token: str) -> Number | None:
    raw = token.strip()
    percent = raw.endswith("%")
    t = raw.rstrip("%").strip().replace("−", "-").replace(",", "")
    try:
        if "/" in t:
            num, den = (p.strip() for p in t.split("/", 1))
            value = float(num) / float(den)
            decimals = 6
        else:
            value = float(t)
            mantissa = t.lower().split("e")[0]
            decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    if not math.isfinite(value):
        return None
    return Number(value, percent, decimals, raw)


def find_numbers(text: str) -> list[Number]:
    """Every number written in digits ("1,234", "-5.0", "3/4", "50%"), in order; number words if there are none."""
    found = [n for n in (to_number(m.group(0)) for m in _NUMBER.finditer(text)) if n is not None]
    if found:
        return found
    words = []
    for m in _WORD_NUMBER.finditer(text):
        if m.group(1):
            value = _TENS[m.group(1).lower()] + (_UNITS[m.group(2).lower()] if m.group(2) else 0)
        else:
            value = _UNITS[m.group(3).lower()]
        words.append(Number(float(value), False, 0, m.group(0)))
    return words


_RESULT_SIGN = re.compile(r"=|≈|\\approx")
# Words after which a whole output states (or corrects to) its answer: "..., but ... it is 12.97", "so 5".
_CONCLUSION = re.compile(
    r"=|≈|\\approx|\b(?:but|however|actually|wait|so|thus|therefore|hence|finally|final|is|are|was|equals|gives)\b",
    re.I)


def _in_digits(number: Number) -> bool:
    """Written in digits ("5", "50%", "3/4"), not as a number word ("five")."""
    return number.text.rstrip("% ")[-1:].isdigit()


def _first_after(text: str, cues: re.Pattern, digits: bool) -> Number | None:
    """The first number after the last cue that has one after it, of the same kind (digits or number words) as the
    text's own numbers: "... is 12.97, so that's it" must not read a later "once" as the answer."""
    for cue in reversed(list(cues.finditer(text))):
        after = find_numbers(text[cue.end() :])
        if after and _in_digits(after[0]) == digits:
            return after[0]
    return None


_RANGE = re.compile(
    rf"\bbetween\s+({NUMBER_PATTERN})\s*\S*\s+and\s+{NUMBER_PATTERN}"
    rf"|(?<![\w.])({NUMBER_PATTERN})\s*\S{{0,12}}\s*(?:\bto\b|–|-)\s*{NUMBER_PATTERN}",
    re.I)


# "3 or 4", "either 1/4 or 3/4", "about 8 or maybe 5": a hedge between two numbers names no answer
_HEDGE_NUMBERS = re.compile(
    rf"(?<![\w.])({NUMBER_PATTERN}(?:\s*/\s*\d+)?)\s*%?\s*(?:\w+\s+)?,?\s*\bor\s+(?:maybe\s+|perhaps\s+|possibly\s+)?"
    rf"{NUMBER_PATTERN}(?![\w])", re.I)


def _in_range(text: str, number: Number) -> bool:
    """Whether `number` opens a range ("between 2 and 6", "10 to 30", "82-246 cm") or a hedge ("3 or 4"): neither
    is a single answer."""
    if any(number.text in (m.group(1), m.group(2)) for m in _RANGE.finditer(text)):
        return True
    return any(number.text.rstrip("% ") == m.group(1) for m in _HEDGE_NUMBERS.finditer(text))


# Asides that count something else: "I count four chairs in total, though 2 are partly hidden", "5 cars (2 red,
# 3 blue)", "ten people, and 3 of them are moving". The answer sits in the main clause; the aside is left out
# when the main clause has a number of its own.
_ASIDE = re.compile(
    r"\([^()]*\)|[,;]\s*(?:though|although|even\s+though|while|whereas|of\s+which|including|excluding|except)\b[^.;\n]*"
    r"|[,;]?\s*\b(?:and|but)\s+(?:only\s+)?\S+\s+of\s+(?:them|these|those)\b[^.;\n]*"
    r"|\s+(?:though|although)\s+[^.;\n]*", re.I)


def _main_clause(text: str) -> str:
    main = _ASIDE.sub(" ", text)
    return main if main != text and find_numbers(main) else text


def parse_number(text: str, whole_text: bool = False) -> Number | None:
    """The answer number of one candidate (see `_answer_number`); None when that number opens a range."""
    number = _answer_number(_main_clause(text), whole_text)
    return None if number is None or _in_range(text, number) else number


def _answer_number(text: str, whole_text: bool = False) -> Number | None:
    """The answer number of one candidate.

    An explicit answer ("the answer is 5 apples") is read from its first number, or from the number after its
    last "=" / "≈" ("2√2 ≈ 2.83" is 2.83). A whole output is read after its last conclusion or correction word
    ("First I thought 25.94, but ... it is 12.97" is 12.97); failing that, a short one from its first number
    ("3 times in 2 rounds") and a long one from its last.
    """
    numbers = find_numbers(text)
    if not numbers:
        return None
    digits = _in_digits(numbers[0])
    if not whole_text:
        return _first_after(text, _RESULT_SIGN, digits) or numbers[0]
    found = _first_after(text, _CONCLUSION, digits)
    if found is not None:
        return found
    return numbers[-1] if len(text.split()) > 12 else numbers[0]


# ---------------------------------------------------------------------------------------------------- yes/no

_YES_NO = re.compile(
    r"(?<![\w'’-])(yes|yeah|yep|yup|correct|indeed|affirmative|no|nope|nah|not\s+yet|incorrect|negative|true|false"
    r"|是|否)(?![\w'’-])", re.I)
_YES = {"yes", "yeah", "yep", "yup", "correct", "indeed", "affirmative", "true", "是", "y"}
_HEDGE = re.compile(r"\s*(?:,\s*)?(?:and|or|/)\s*$", re.I)  # "yes and no", "yes or no", "yes/no": no answer
# A correction after an opening yes/no ("No... actually, Yes."): the later word is the answer.
_CORRECTION = re.compile(r"\b(?:actually|wait|on second thought|correction|rather|instead|i mean)\b", re.I)


# Yes and no said in words. Negative phrases are tried first: "I don't think so" also holds "think so".
_NO_PHRASE = re.compile(
    r"\b(?:(?:absolutely|definitely|certainly|surely|of\s+course)\s+not|not\s+at\s+all|no\s+way"
    r"|(?:don['’]t|do\s+not|doesn['’]t|does\s+not)\s+(?:think|believe)\s+so"
    r"|(?:has|have)(?:n['’]t|\s+not)\s+(?:yet\s+)?been\s+(?:completed|finished|done)"
    r"|(?:is|are)(?:n['’]t|\s+not)\s+(?:yet\s+)?(?:completed|finished|done))\b", re.I)
_YES_PHRASE = re.compile(
    r"^(?:absolutely|definitely|certainly|of\s+course|sure|surely)\b(?!\s+not)"
    r"|\b(?:i\s+)?(?:think|believe)\s+so\b|\bthat['’]?s\s+(?:right|correct)\b"
    r"|\b(?:has|have)\s+(?:already\s+)?been\s+(?:completed|finished|done)\b", re.I)


def _yes_no_in_words(text: str) -> str | None:
    if _NO_PHRASE.search(text):
        return "no"
    return "yes" if _YES_PHRASE.search(text) else None


def parse_yes_no(text: str, whole_text: bool = False) -> str | None:
    """ "yes" / "no" from whole words only: "NOT", "KNOW", "EYES", "nobody" are not answers; "Nope", "Not yet",
    "Yeah" are. A bare "Y"/"N" counts.

    An explicit answer is read from its first yes/no word, unless a correction ("actually", "wait") follows it;
    a whole output from its first word if that is yes/no and not corrected later, else its last yes/no word.
    """
    t = clean_answer(text)
    if t.upper() in ("Y", "N"):
        return "yes" if t.upper() == "Y" else "no"
    found = list(_YES_NO.finditer(t))
    if not found:
        return _yes_no_in_words(t)
    for a, b in zip(found, found[1:]):
        if _HEDGE.fullmatch(t[a.end() : b.start()]) and (a.group(1).lower() in _YES) != (b.group(1).lower() in _YES):
            return None
    corrected = _CORRECTION.search(t, found[0].end()) is not None and len(found) > 1
    if corrected or (whole_text and not _YES_NO.match(t)):
        word = found[-1].group(1)
    else:
        word = found[0].group(1)
    return "yes" if word.lower() in _YES else "no"


# ------------------------------------------------------------------------------------------------------ JSON

_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.S | re.I)
_MAX_OBJECTS = 64


def json_objects(text: str) -> list[dict]:
    """Every top-level `{...}` object in the text that parses as JSON (or as a Python literal), in order.

    Fenced ```json blocks are read too. Malformed fragments are skipped; deep nesting never raises.
    """
    out: list[dict] = []
    decoder = json.JSONDecoder()
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for source in sources:
        pos, tries = 0, 0
        while tries < _MAX_OBJECTS:
            start = source.find("{", pos)
            if start < 0:
                break
            tries += 1
            obj, end = _decode_object(decoder, source, start)
            if isinstance(obj, dict):
                out.append(obj)
                pos = end
            else:
                pos = start + 1
    return out


def _decode_object(decoder: json.JSONDecoder, text: str, start: int) -> tuple[object, int]:
    try:
        return decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start)
    if end is None:
        return None, start
    try:
        value = ast.literal_eval(text[start:end])  # literals only: nothing is executed
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None, start
    return value, end


def _balanced_end(text: str, start: int, limit: int = 20000) -> int | None:
    """The index after the brace that closes the one at `start`, looking at most `limit` characters ahead."""
    depth = 0
    for i in range(start, min(len(text), start + limit)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def number_list(value: object, length: int) -> list[float] | None:
    """`value` as a list of `length` finite floats (numbers or numeric strings), else None."""
    if not isinstance(value, (list, tuple)) or len(value) != length:
        return None
    out = []
    for v in value:
        if isinstance(v, bool):
            return None
        if isinstance(v, str):
            n = to_number(v)
            if n is None:
                return None
            v = n.value
        if not isinstance(v, (int, float)):
            return None
        try:
            f = float(v)
        except (OverflowError, ValueError):
            return None
        if not math.isfinite(f):
            return None
        out.append(f)
    return out
