"""Tokenizing many prompts that share most of their lines: each line is tokenized once, not once per prompt.

A rendered prompt is the chat template's lines, the benchmark template's instructions and option lines, and the
question: only the question (and often the options) differ between samples, yet tokenizing whole prompts spends most
of its time on the shared lines, and at 100,000 questions tokenizing was the largest part of a plan.

Cutting a text into pieces and tokenizing them apart gives the same ids as tokenizing it whole only when every cut is
a place the tokenizer itself would cut. For the byte-level BPE tokenizers of the Qwen / Llama-3 / GLM-4 kind (the
families here) this holds after a newline followed by a printable ASCII character: the pre-tokenizer's split pattern
(below) never joins a newline to a following non-space character, BPE merges never cross its pieces, NFC never composes
across such a cut, and no added token is stripped into or contains a newline. `LineTokenizer.of` checks all of that on
the live tokenizer (and ids on probe texts) and answers None otherwise: other tokenizers keep whole-text tokenizing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Callable, Sequence

# Pre-tokenizer split patterns for which a cut after "\n" before a non-space character is a cut of the pattern:
# every alternative that can hold a newline ( ?[^\s\p{L}\p{N}]+[\r\n]* , \s*[\r\n]+ , \s+(?!\S) , \s+ ) ends at the
# newline when a non-space character follows, and no alternative starts with a newline then goes on into one.
_SAFE_PATTERNS = frozenset({
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)"
    r"|\s+",
})
CUT = re.compile(r"(?<=\n)(?=[!-~])")  # after a newline, before printable ASCII that is not a space
_PROBES = ("line one\nline two\n", "\n\nA: x\nB: y\n\nAnswer.\n", "a \n b\n\tc\n\n\nd", "x\n<|im_end|>\ny",
           "caf\u00e9\n\u0301e\nn\u0303o\n", "1234\n5678\n's\n's", "  \n  \n!\n?\n")
MEMO_MAX = 65536  # pieces kept across chunks (the shared lines); a bound for suites whose every line differs


class LineTokenizer:
    """Token ids of texts, tokenized piece by piece with the pieces that recur remembered."""

    def __init__(self, backend: Any):
        self.backend = backend  # a `tokenizers.Tokenizer`
        self.memo: dict[str, list[int]] = {}

    @classmethod
    def of(cls, backend: Any) -> LineTokenizer | None:
        """A LineTokenizer for `backend` when cutting at lines gives the ids of the whole text, else None."""
        try:
            if not safe_config(backend):
                return None
            tok = cls(backend)
            whole = [e.ids for e in backend.encode_batch_fast(list(_PROBES), add_special_tokens=True)]
            return tok if tok.encode(list(_PROBES)) == whole else None
        except Exception:  # noqa: BLE001 - any surprise in a tokenizer's internals: tokenize whole texts
            return None

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if len(self.memo) > MEMO_MAX:
            self.memo.clear()
        pieces = [CUT.split(t) for t in texts]
        counts = Counter(p for ps in pieces for p in ps)
        # Lines that recur are tokenized alone (once); a run of lines that do not is tokenized as one text, as
        # before (a call per line would cost more than it saves when the question and every option differ).
        segments = [_segments(ps, lambda p: p in self.memo or counts[p] > 1) for ps in pieces]
        fresh = list(dict.fromkeys(g for gs in segments for g in gs if g not in self.memo))
        ids = dict(zip(fresh, (e.ids for e in self.backend.encode_batch_fast(fresh, add_special_tokens=False))))
        self.memo.update((g, ids[g]) for g in fresh if counts.get(g, 0) > 1)  # a piece seen once: likely a question
        out = []
        for gs in segments:
            row: list[int] = []
            for g in gs:
                known = self.memo.get(g)
                row += ids[g] if known is None else known
            out.append(row)
        return out


def _segments(pieces: list[str], shared: Callable[[str], bool]) -> list[str]:
    """`pieces` with each run of consecutive pieces that are not `shared` joined into one."""
    out: list[str] = []
    run: list[str] = []
    for p in pieces:
        if shared(p):
            if run:
                out.append("".join(run))
                run = []
            out.append(p)
        else:
            run.append(p)
    if run:
        out.append("".join(run))
    return out


def safe_config(backend: Any) -> bool:
    """The tokenizer's normalizer, pre-tokenizer, model, post-processor and added tokens keep line cuts exact."""
    def state(part: Any) -> Any:
        return json.loads(part.__getstate__()) if part is not None else None

    normalizer, pre, post = state(backend.normalizer), state(backend.pre_tokenizer), state(backend.post_processor)
    if normalizer is not None and normalizer.get("type") != "NFC":
        return False
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre]
    if len(steps) != 2:
        return False
    split, level = steps
    if (split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
            or split.get("pattern", {}).get("Regex") not in _SAFE_PATTERNS):
        return False
    if level.get("type") != "ByteLevel" or level.get("add_prefix_space") or level.get("use_regex"):
        return False
    if type(backend.model).__name__ != "BPE" or getattr(backend.model, "dropout", None):
        return False
    adds_tokens = post is not None and post.get("type") != "ByteLevel" and (
        post.get("type") != "TemplateProcessing" or post.get("special_tokens") or len(post.get("single", [])) != 1)
    if adds_tokens:  # BOS / EOS around the whole text: pieces would each get them
        return False
    added = backend.get_added_tokens_decoder().values()
    return not any(a.lstrip or a.rstrip or a.single_word or "\n" in a.content for a in added)
