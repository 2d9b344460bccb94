"""CSV cells that are safe to open in a spreadsheet (the OWASP rule against formula injection).

Model outputs, questions and ids reach the CSV exports verbatim. A cell beginning with `=`, `+`, `-`, `@`, a tab or
a carriage return is read by Excel, LibreOffice and Google Sheets as a formula (which can fetch URLs or run
commands through DDE), so such a text cell gets a leading apostrophe: shown as text, never evaluated; so does one
whose first character after leading whitespace (spaces, line breaks) is one of those, since spreadsheets trim it,
and one holding a line that starts so.
Numbers are written as numbers (a negative score is not a formula).

A cell holding a line break stays one cell: `csv_text` quotes every cell with a carriage return or a line feed (a
bare `\r` in a model output used to end the row there, and the next "row" began with the rest of the output, a
formula nobody had checked).
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
_LINE_FORMULA = re.compile(r"[\r\n][ \t]*[=+\-@]")  # a line inside the cell that starts as a formula would


def safe_cell(value: Any) -> Any:
    """`value`, with a text cell that a spreadsheet would run as a formula prefixed by an apostrophe: one starting
    with a formula character, after leading whitespace or not, or holding a line that does (`B\r=cmd|...`)."""
    if isinstance(value, str) and (value.lstrip().startswith(FORMULA_STARTS) or value.startswith(FORMULA_STARTS)
                                   or _LINE_FORMULA.search(value)):
        return "'" + value
    return value


def csv_text(df: pd.DataFrame) -> str:
    """`df` as CSV with `\n` row ends, every cell holding `\r` or `\n` quoted (pandas quotes only the characters of
    its line terminator: written with `\r\n`, then the row ends outside quotes made `\n`)."""
    parts = df.to_csv(index=False, lineterminator="\r\n").split('"')
    # Even parts are outside quotes (an escaped `""` leaves an empty odd part between them): only there a `\r\n` ends
    # a row.
    return '"'.join(p.replace("\r\n", "\n") if i % 2 == 0 else p for i, p in enumerate(parts))
