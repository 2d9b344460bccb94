"""Token counts of prompt texts, without their ids: what a plan needs for the text part of 100,000 prompts.

The plan needs each prompt's length, and ids only where a video or image placeholder sits (the chat template's frame
around the text, tokenized once per media layout: tokens.py). Counting a text costs less than tokenizing it:

- A plain text (printable ASCII, tabs and line ends, no added token's text) whose every space follows a character
  that is not whitespace is cut before each space, a place where the pre-tokenizer's pattern always cuts (no piece
  holds a space after its first character but a whitespace run, which cannot begin before that space). Each word's
  count is remembered: words recur even when every question differs.
- A word not seen before is cut into the pre-tokenizer's own pieces by the same split pattern written for ASCII
  (below), and each piece's BPE length is remembered.
- Other texts are counted by lines (cut as pieces.py cuts them, where the tokenizer itself cuts), remembered; plain
  lines as above, any other line (non-ASCII, control characters, an added token's text) by the tokenizer itself.

Why the ASCII split is the tokenizer's: the pipeline of the byte-level BPE tokenizers accepted here (pieces.py's
`safe_config`: NFC or no normalizer, a Split with one of the known patterns then ByteLevel without its own regex, a
BPE model, no tokens added around the text) is normalize, cut out added tokens, split by the pattern, map bytes,
BPE each piece. On printable ASCII, NFC changes nothing; the pattern's classes \\p{L}, \\p{N} and \\s hold exactly
[A-Za-z], [0-9] and [\\t\\n\\r ] (the characters \\x0b, \\x0c and \\x1c-\\x1f, whose \\s membership differs between
regex engines, are not plain); Python's `re` and Oniguruma are both backtracking engines with leftmost-first
alternation, so the same pattern picks the same pieces, and with these classes every plain character is matched by
some alternative (no gaps, which the Split would keep as pieces too). A piece's length is the BPE model's own
`tokenize` of its byte-level form. `TextCounter.of` also compares counts with the tokenizer's on probe texts, and
tests/test_workload_counts.py on many random texts.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Collection, Sequence

from ..families.base import count_runs
from .pieces import CUT, safe_config

# The pre-tokenizer patterns pieces.py accepts, each written for plain ASCII (see the module docstring).
_ASCII_PATTERNS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)"
        r"|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)"
    r"|\s+":
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
}
_PLAIN = re.compile(r"[\t\n\r -~]*")  # printable ASCII, tab, newline, carriage return
_PROBES = ("", "Question 12: which colour is it?\nA. red (12)\nB. green\n\nThe best answer is:",
           "  two  spaces\t\ttabs \n\n\n  x  \r\n", "it's I'LL we'd they've 1234567 3.14 $5,000.00 (A) [b] {c}",
           "<|im_end|> inside\n<|video_pad|>", "caf\u00e9 e\u0301 \u4e2d\u6587 \u00a0nbsp\u2028sep\x1c\x0b",
           "\n\nA\n\n", "a trailing space ", "A: x\nB: y ")
# Texts put between a frame's halves to check that they tokenize apart from it (frame_tokens).
_FRAME_PROBES = ("x", " x ", "\n", "\n\nQuestion?\nA. a\n\n", "  ", "\t", "e\u0301 caf\u00e9\u00a0", "<|im_end|>", "'s")
MEMO_MAX = 1 << 16  # lines and pieces remembered; cleared beyond (a suite whose every line differs stays bounded)


class _Memo(dict[str, int]):
    """Counts of strings, each computed on first use (`count` of the string with `lead` before it)."""

    def __init__(self, count: Callable[[str], int], lead: str = ""):
        super().__init__()
        self._count, self._lead = count, lead

    def __missing__(self, key: str) -> int:
        n = self[key] = self._count(self._lead + key)
        return n


class TextCounter:
    """Token counts of texts as the tokenizer would tokenize each alone (no tokens added around them)."""

    def __init__(self, backend: Any, split: re.Pattern[str], watched: Collection[int]):
        from tokenizers import pre_tokenizers

        self.backend = backend  # a `tokenizers.Tokenizer`
        self._split = split
        self._watched = frozenset(watched)
        added = sorted((a.content for a in backend.get_added_tokens_decoder().values()), key=len, reverse=True)
        self._added = re.compile("|".join(map(re.escape, added))) if added else None
        starts = {a[0] for a in added if a}
        plain = "".join(re.escape(c) for c in "\t\n\r" + "".join(map(chr, range(0x20, 0x7f))) if c not in starts)
        self._plain_without_added = re.compile(f"[{plain}]*")
        self._bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        self._lines: dict[str, int] = {}
        self._pieces = _Memo(self._bpe)  # a pre-tokenizer piece -> its BPE length
        # Where every digit is a piece of its own (the pattern's \p{N} without {1,3}: no other alternative holds a
        # digit, and the pattern names no particular digit) and one token, digits can all be counted as 0: the
        # words of numbered questions and options then recur.
        single = "[0-9]|" in split.pattern and all(self._bpe(d) == 1 for d in "0123456789")
        self._digits = bytes.maketrans(b"123456789", b"000000000") if single else None
        self._first = _Memo(self._plain)  # a text's first word -> its count
        self._words = _Memo(self._plain, " ")  # what follows a space, up to the next one -> " " + it, counted

    @classmethod
    def of(cls, backend: Any, watched: Collection[int] = ()) -> TextCounter | None:
        """A TextCounter for `backend` when its counts are provably the tokenizer's, else None. `watched`: ids whose
        presence in a text's tokens the caller must see (placeholders): a text that could hold one is not counted."""
        try:
            split = _ascii_split(backend)
            if split is None:
                return None
            counter = cls(backend, split, watched)
            if not all(counter._only_as_added(i) for i in watched):
                return None
            whole = [e.ids for e in backend.encode_batch_fast(list(_PROBES), add_special_tokens=False)]
            same = all(n == len(ids) or (n is None and counter._watched.intersection(ids))
                       for n, ids in zip(counter.counts(list(_PROBES)), whole))
            return counter if same else None
        except Exception:  # noqa: BLE001 - any surprise in a tokenizer's internals: no counting shortcut
            return None

    def _only_as_added(self, token_id: int) -> bool:
        """The BPE model yields `token_id` from no plain text: it is not in its vocabulary, or only as the added
        token's own text (and a line that holds an added token's text is tokenized by the tokenizer)."""
        vocab = self.backend.model.id_to_token(token_id)
        added = self.backend.get_added_tokens_decoder().get(token_id)
        return vocab is None or (added is not None and vocab == self._bytes.pre_tokenize_str(added.content)[0][0])

    def counts(self, texts: Sequence[str]) -> list[int | None]:
        """Each text's token count; None for a text whose tokens may hold a watched id (tokenize it instead)."""
        return [self.count(t) for t in texts]

    def count(self, text: str) -> int | None:
        if self._is_plain(text) and _tight(text):
            # Every space follows a character that is not whitespace: a place the pattern always cuts (no piece
            # holds a space after its first character but whitespace runs, which cannot begin before it). So the
            # text's count is its words' counts, and words recur (remembered) even when every question differs.
            if len(self._words) >= MEMO_MAX:
                self._words.clear()
            if self._digits is not None:  # plain: ASCII
                text = text.encode("ascii").translate(self._digits).decode("ascii")
            first, space, rest = text.partition(" ")
            return self._first[first] + (sum(map(self._words.__getitem__, rest.split(" "))) if space else 0)
        return self._by_lines(text)

    def _by_lines(self, text: str) -> int | None:
        lines = self._lines
        total = 0
        for line in CUT.split(text):
            n = lines.get(line)
            if n is None:
                n = self._line(line)
                if n is None:
                    return None
                if len(lines) >= MEMO_MAX:
                    lines.clear()
                lines[line] = n
            total += n
        return total

    def _is_plain(self, text: str) -> bool:
        """Printable ASCII (with tab and line ends) without an added token's text."""
        if self._plain_without_added.fullmatch(text) is not None:  # not even an added token's first character
            return True
        return _PLAIN.fullmatch(text) is not None and (self._added is None or self._added.search(text) is None)

    def _line(self, line: str) -> int | None:
        if self._is_plain(line):
            return self._plain(line)
        ids = self.backend.encode(line, add_special_tokens=False).ids
        return None if self._watched.intersection(ids) else len(ids)

    def _plain(self, text: str) -> int:
        """The count of a plain text (`_is_plain`): its pieces' BPE lengths."""
        if len(self._pieces) >= MEMO_MAX:
            self._pieces.clear()
        return sum(map(self._pieces.__getitem__, self._split.findall(text)))

    def _bpe(self, piece: str) -> int:
        return len(self.backend.model.tokenize(self._bytes.pre_tokenize_str(piece)[0][0]))


def _tight(text: str) -> bool:
    """No space at the start or after whitespace (str operations: a regex search was slower)."""
    return text[:1] != " " and "  " not in text and "\n " not in text and "\t " not in text and "\r " not in text


def _ascii_split(backend: Any) -> re.Pattern[str] | None:
    """The tokenizer's split pattern written for plain ASCII, when the tokenizer is one whose pipeline is the one the
    module docstring describes; None otherwise."""
    if not safe_config(backend) or backend.truncation or backend.padding or backend.encode_special_tokens:
        return None
    steps = json.loads(backend.pre_tokenizer.__getstate__())["pretokenizers"]  # safe_config: a 2-step Sequence
    ascii_pattern = _ASCII_PATTERNS.get(steps[0]["pattern"]["Regex"])
    return re.compile(ascii_pattern) if ascii_pattern else None


def frame_tokens(backend: Any, before: str, after: str, target: Sequence[int], image_id: int) -> int | None:
    """Tokens of the chat template's frame (`before` and `after` the text), placeholders not counted, when any
    non-empty text in between tokenizes as it does alone: the frame's halves end and start with added tokens the
    tokenizer cuts out first (not normalized, none stripping whitespace), no added token's text can begin in one part
    and end in the next, and probe texts confirm it. Then a prompt's tokens are the frame's, the text's and, as the
    text holds no placeholder (TextCounter's `watched`), no placeholder run spans the parts. None otherwise."""
    if not safe_config(backend):
        return None
    added = backend.get_added_tokens_decoder()
    head = backend.encode(before, add_special_tokens=False).ids
    tail = backend.encode(after, add_special_tokens=False).ids
    texts = [a.content for a in added.values()]
    spans_out = any(before.endswith(t[:k]) for t in texts for k in range(1, len(t)))
    spans_in = any(after.startswith(t[k:]) for t in texts for k in range(1, len(t)))
    if spans_out or spans_in or not (_bounded(before, head[-1:], added, before.endswith)
                                     and _bounded(after, tail[:1], added, after.startswith)):
        return None
    for text in _FRAME_PROBES:
        alone = backend.encode(text, add_special_tokens=False).ids
        if backend.encode(before + text + after, add_special_tokens=True).ids != head + alone + tail:
            return None
    placeholders = (count_runs(head, target) + count_runs(tail, target)) * len(target)
    return int(len(head) + len(tail) - placeholders - head.count(image_id) - tail.count(image_id))


def _bounded(part: str, edge: list[int], added: dict[int, Any], has: Any) -> bool:
    """`part` is empty, or its token at the text's side (`edge`) is an added token whose own text is there."""
    if not part:
        return True
    token = added.get(edge[0]) if edge else None
    return token is not None and not token.normalized and has(token.content)
