"""CSV exports stay safe in a spreadsheet whatever a model writes (issue 37): a bare carriage return used to end the
row inside a cell (`B\\r=cmd|' /C calc'!A0` read back as two rows, the second starting with the formula), and
leading whitespace before `=`, `+`, `-`, `@` slipped past the guard."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
from test_leaderboard_runs import make_run, right

from vbench_async.leaderboard import build_site
from vbench_async.leaderboard.csv_cells import csv_text, safe_cell

HOSTILE = ["B\r=cmd|' /C calc'!A0", " =1+2", "\r\n@SUM(A1)", "fine\n-2+3", "\t+x", "x\r+y\r", "\n\n=1"]
FORMULA = ("=", "+", "-", "@")


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_hostile_cells_keep_their_row_and_get_an_apostrophe() -> None:
    cells = [safe_cell(v) for v in HOSTILE] + ["plain", "a\"b\r\nc"]
    df = pd.DataFrame({"output": cells, "n": range(len(cells))})
    rows = _cells(csv_text(df))
    assert len(rows) == len(HOSTILE) + 3 and [r[1] for r in rows[1:]] == [str(i) for i in range(len(HOSTILE) + 2)]
    assert [r[0] for r in rows[1:len(HOSTILE) + 1]] == ["'" + v for v in HOSTILE]  # kept, as text
    assert rows[-1][0] == "a\"b\r\nc"  # harmless: one quoted cell, no apostrophe
    assert len(pd.read_csv(io.StringIO(csv_text(df)))) == len(HOSTILE) + 2
    assert "\r\n" not in csv_text(pd.DataFrame({"a": ["x", "y"]}))  # rows still end with "\n"


def test_a_sites_samples_csv_reads_back_with_one_row_per_sample(tmp_path: Path) -> None:
    def answer(sample, i: int) -> str:
        return HOSTILE[i] if i < len(HOSTILE) else right(sample, i)

    run = make_run(tmp_path / "run", "model-hostile", answer, benchmarks=("demo-mc",))
    site = build_site([run], tmp_path / "site", frames=False)
    text = (site / "data" / "demo-mc.samples.csv").read_text(encoding="utf-8")
    rows = _cells(text)
    n_samples = len(pd.read_json(site / "data" / "demo-mc.samples.json"))
    assert len(rows) == n_samples + 1 and len(pd.read_csv(io.StringIO(text))) == n_samples
    width = len(rows[0])
    assert all(len(r) == width for r in rows), [len(r) for r in rows]
    for row in rows[1:]:
        for cell in row:
            assert not cell.lstrip().startswith(FORMULA) or cell[:1] == "'" or _number(cell), cell
            assert not any(line.lstrip().startswith(FORMULA) for line in cell.splitlines()[1:]) or cell[:1] == "'", cell


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
