"""CSV cells that are safe to open in a spreadsheet (the OWASP rule against formula injection).

Model outputs, questions and ids reach the CSV exports verbatim. A cell beginning with `=`, `+`, `-`, `@`, a tab or
a carriage return is read by Excel, LibreOffice and Google Sheets as a formula (which can fetch URLs or run
commands through DDE), so such a text cell gets a leading apostrophe: shown as text, never evaluated. Numbers are
written as numbers (a negative score is not a formula).
"""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """`value`, with a text cell that a spreadsheet would run as a formula prefixed by an apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
