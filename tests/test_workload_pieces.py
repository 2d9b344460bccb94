"""Prompts tokenized line by line give the ids of whole-text tokenizing, and tokenizers where that is not sure are
left to whole texts (vbench_async/workload/pieces.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from vbench_async import models
from vbench_async.workload.pieces import LineTokenizer

tokenizers = pytest.importorskip("tokenizers")

PARTS = ["\n", "\n\n", " ", "  ", "\t", "A", "b", "Q", "\u00e9", "\u0301", "1", "23", "'s", "!", "?", ".", ":",
         "<|im_end|>", "<|im_start|>", "<|video_pad|>", "\r\n", "\u4e2d\u6587", " \n", "\u00a0", "\u2028", "\x1c"]


def _tokenizer() -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(Path(models.resolve("tiny-qwen3-vl").path) / "tokenizer.json"))


def test_line_by_line_ids_are_the_whole_texts_ids() -> None:
    tok = _tokenizer()
    lines = LineTokenizer.of(tok)
    assert lines is not None
    rnd = random.Random(7)
    texts = ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(0, 30))) for _ in range(3000)]
    texts += [f"<|im_start|>user\n<|video_pad|>\nQuestion {i}?\nA. x\nB. y\n\nAnswer.\n<|im_end|>\n" for i in range(50)]
    whole = [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=True)]
    assert lines.encode(texts) == whole
    assert lines.memo and lines.encode(texts) == whole  # again, from the remembered lines


def test_tokenizers_that_cut_elsewhere_or_add_tokens_keep_whole_texts() -> None:
    from tokenizers import pre_tokenizers, processors

    tok = _tokenizer()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # not a pattern known to cut after newlines
    assert LineTokenizer.of(tok) is None
    tok = _tokenizer()
    tok.post_processor = processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[
        ("<|im_start|>", tok.token_to_id("<|im_start|>"))])  # a BOS on every text: each piece would get one
    assert LineTokenizer.of(tok) is None
