"""Elements of a top-level JSON array, decoded one at a time from a text stream.

An annotation file of tens of thousands of records then never exists in memory as a whole: neither its text nor the
list of parsed dicts (which take several times the file's size). Each element is parsed, handed on, and dropped.
"""

from __future__ import annotations

import json
import re
from typing import IO, Any, Iterator

CHUNK_CHARS = 1 << 18
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class _Buffer:
    """A window on the stream: `text[pos:]` is what is not consumed yet; `more()` appends the next chunk."""

    def __init__(self, fh: IO[str], chunk: int):
        self.fh, self.chunk = fh, chunk
        self.text, self.pos, self.eof = "", 0, False

    def more(self) -> bool:
        data = self.fh.read(self.chunk)
        if not data:
            self.eof = True
            return False
        self.text, self.pos = self.text[self.pos:] + data, 0  # drop the consumed prefix
        return True

    def skip_space(self) -> str:
        """Move past whitespace; return the next character ("" at the end of the stream)."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def decode(self) -> Any:
        """The JSON value at `pos`, reading further chunks while it runs past the window."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                if self.more():
                    continue
                raise
            # A number near the window's edge may continue in the next chunk: "12|34", or "1.|5" and "1.5e+|3", which
            # decode as a shorter number followed by at most two stray characters. Look past them before trusting it.
            if len(self.text) - end < 3 and self.more():
                continue
            self.pos = end
            return value


def iter_json_array(fh: IO[str], chunk: int = CHUNK_CHARS) -> Iterator[Any]:
    """Yield the elements of the JSON array in `fh`; a top-level non-array value is yielded as the only element.

    Raises json.JSONDecodeError for bad syntax anywhere in the stream (positions count from the current window; the
    message names the element)."""
    buf = _Buffer(fh, chunk)
    first = buf.skip_space()
    if first != "[":
        if first == "":
            raise json.JSONDecodeError("the file is empty", "", 0)
        yield buf.decode()
        _expect_end(buf)
        return
    buf.pos += 1
    if buf.skip_space() == "]":
        buf.pos += 1
        _expect_end(buf)
        return
    index = 0
    while True:
        try:
            yield buf.decode()
        except json.JSONDecodeError as exc:
            raise json.JSONDecodeError(f"array element #{index}: {exc.msg}", exc.doc, exc.pos) from None
        index += 1
        sep = buf.skip_space()
        if sep == "]":
            buf.pos += 1
            _expect_end(buf)
            return
        if sep != ",":
            raise json.JSONDecodeError(f"expected ',' or ']' after array element #{index - 1}", buf.text, buf.pos)
        buf.pos += 1
        buf.skip_space()


def _expect_end(buf: _Buffer) -> None:
    if buf.skip_space():
        raise json.JSONDecodeError("extra data after the top-level value", buf.text, buf.pos)
