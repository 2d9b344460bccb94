"""A fast tokenizer's state in a file (the tokenizers library's own JSON, tokenizer.json's format), for the plan's memo
(memo.py): the next plan builds the same `tokenizers.Tokenizer` from it without importing transformers.

The state is the live one, as transformers configured it (its added tokens, post-processor and so on), not the model
directory's tokenizer.json. It is kept only when it reads back to itself and the copy tokenizes probe texts as the
original does, and never while truncation or padding is set (transformers changes those per call, so they are not
the tokenizer's own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..frames.layout import write_text_atomic

_PROBES = ["Question 1: what?\nA. red\n", "  <|im_end|>\n<|im_start|>assistant\n", "caf\u00e9 e\u0301 \u4e2d 1234 it's"]


def save(backend: Any, path: Path) -> bool:
    """Write `backend`'s state to `path` when a copy made from it is the same tokenizer; True when written."""
    try:
        from tokenizers import Tokenizer

        if backend.truncation is not None or backend.padding is not None:
            return False
        state = backend.to_str()
        copy = Tokenizer.from_str(state)
        same = (copy.to_str() == state and copy.encode_special_tokens == backend.encode_special_tokens
                and _ids(copy) == _ids(backend))
        if same:
            write_text_atomic(path, state)
        return same
    except Exception:  # noqa: BLE001 - no copy (a read-only cache, an odd tokenizer): the next plan loads the processor
        return False


def load(path: Path) -> Any:
    """The tokenizer saved at `path`, or None."""
    try:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(path)) if path.is_file() else None
    except Exception:  # noqa: BLE001 - damaged: the processor's own is used (and saved again)
        return None


def _ids(backend: Any) -> list[list[int]]:
    return [e.ids for e in backend.encode_batch_fast(_PROBES, add_special_tokens=True)]
