"""The index page's board: per run its rank, metadata (family, parameters, revision, date, frames) and short badges;
the benchmark groups a reader can switch between; each column's chance level.

The numbers themselves come from `tables.board_of` (the same rows as the CSV/JSON exports), keyed by column id; this
module only decides how they are laid out and labelled, and reads every cell by its column id, never by position.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from ..scoring.extract import answer_tag
from .families import bench_frames, run_family
from .load import Run
from .tables import ScoreCell

ALL = "all shown"
_SHORT_BADGE = 22  # characters of a badge shown; the whole text is its tooltip


def truth_text(answer: Any) -> str:
    """A ground truth as a reader wants it: the answer inside `<answer>...</answer>`, not the tag around it."""
    if answer is None:
        return ""
    text = answer if isinstance(answer, str) else str(answer)
    inner = answer_tag(text)
    return inner if inner else text


def human_count(n: int | None) -> str:
    """714K, 7.6B: a parameter count as model cards write it ("–" when unknown)."""
    if not isinstance(n, int) or n <= 0:
        return "–"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


@dataclass(frozen=True)
class Badge:
    text: str  # what the cell shows
    title: str  # the whole marker, on hover


def badge(marker: str) -> Badge:
    """A marker shortened to fit a compact cell: a config letter keeps only the setting names' last part."""
    text = marker
    if marker.startswith("config") and ": " in marker:
        head, note = marker.split(": ", 1)
        settings = [s.strip().rsplit(".", 1)[-1] for s in note.split(", ")]
        text = settings[0] + (f" +{len(settings) - 1}" if len(settings) > 1 else "")
    if len(text) > _SHORT_BADGE:
        text = text[: _SHORT_BADGE - 1] + "…"
    return Badge(text, marker)


def lay_out(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """Give each board row its metadata and badges and each cell (`row["cells"]`: column id -> cell) its flags, in
    place; `columns` are the board's column ids in order.

    A config letter is a mark only where it is the exception: cells whose settings match most runs of their column
    carry none, the others are marked (`cfg`) and their row gets one short badge naming the setting that differs."""
    usual: dict[str, str | None] = {}
    for cid in columns:
        counts = Counter(c.get("config_group") for r in rows if (c := r["cells"].get(cid)) and c.get("config_group"))
        usual[cid] = counts.most_common(1)[0][0] if counts else None
    for row in rows:
        row["meta"] = run_meta(row["run"])
        notes: dict[str, str] = {}
        cells: dict[str, dict[str, Any]] = {}
        for cid in columns:
            cell = row["cells"].get(cid)
            if cell is None:
                continue
            markers = [m for m in (cell.get("markers") or "").split("; ") if m]
            config = next((m for m in markers if m.startswith("config ")), None)
            odd = bool(config) and cell.get("config_group") != usual[cid]
            if odd and config:
                notes.setdefault(config.split(": ", 1)[1] if ": " in config else config, config)
            cells[cid] = {**cell, "config_odd": odd, "flags": [m for m in markers if not m.startswith("config ")],
                          "tooltip": "; ".join(markers)}
        row["cells"] = cells
        row["badges"] = [badge(m) for m in row["run"].markers] + [badge(f"config: {note}") for note in notes]


def run_meta(run: Run) -> dict[str, str]:
    """What the index says about a run's model, every value a display string ("–" when unknown)."""
    m = run.manifest or {}
    model = m.get("model") or {}
    revision = model.get("revision")
    fingerprint = str(model.get("fingerprint") or "")
    if not revision and fingerprint.startswith("hub:") and "@" in fingerprint:
        revision = fingerprint.rsplit("@", 1)[1]
    rev = str(revision)[:7] if revision and revision != "unknown" else fingerprint[:7] or "–"
    frames = list(dict.fromkeys(bench_frames(b) for b in run.benchmarks.values() if bench_frames(b)))
    return {"family": run_family(run), "parameters": human_count(model.get("parameters")), "revision": rev,
            "revision_title": "hub revision" if revision else "content fingerprint of the checkpoint",
            "date": str(m.get("started_at") or "")[:10] or "–",
            "frames": frames[0] if len(frames) == 1 else "frames vary" if frames else "–",
            "frames_title": "; ".join(frames)}


def groups(columns: Sequence[dict[str, Any]], suites: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The views of the board: every benchmark, then each suite shown (its benchmarks and its average column). The
    first view is the default: the suite made of every benchmark shown when there is one."""
    bids = [c["id"] for c in columns if c["kind"] == "benchmark"]
    out = []
    whole = next((name for name, members in suites.items() if sorted(members) == sorted(bids)), None) or \
        (ALL if ALL in suites else None)
    out.append({"name": whole or ALL, "members": bids, "avg": f"avg: {whole}" if whole else None})
    for name, members in suites.items():
        if name != whole:
            out.append({"name": name, "members": list(members), "avg": f"avg: {name}"})
    return out


def rank(grid: list[dict[str, Any]], column: str | None) -> None:
    """Set each row's `rank` (1 = best) by its score in column `column` (an id); rows without one get none."""
    if column is None:
        for row in grid:
            row["rank"] = None
        return
    score = [ScoreCell.of(cell).score if (cell := row["cells"].get(column)) else None for row in grid]
    ranked = sorted({s for s in score if s is not None}, reverse=True)
    for row, s in zip(grid, score):
        row["rank"] = ranked.index(s) + 1 if s is not None else None


def chances(runs: list[Run], columns: Sequence[dict[str, Any]],
            suites: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Per column id: the chance level of its benchmark (`scoring.chance`, as the summary records it; suites: the mean
    of their members', free-form ones as 0). `free` marks a column whose answers are free-form."""
    per: dict[str, float | None] = {}
    seen: set[str] = set()
    for r in runs:
        for bid, b in r.benchmarks.items():
            if "chance" in b.aggregate:
                seen.add(bid)
                if b.aggregate["chance"] is not None:
                    per.setdefault(bid, float(b.aggregate["chance"]))
    out: dict[str, dict[str, Any]] = {}
    for c in columns:
        if c["kind"] == "benchmark":
            value = per.get(c["id"])
            known = c["id"] in seen
        else:
            members = suites.get(c["id"].removeprefix("avg: "), [])
            known = bool(members) and all(m in seen for m in members)
            value = sum(per.get(m) or 0.0 for m in members) / len(members) if known else None
        out[c["id"]] = {"value": value, "free": known and value is None, "known": known}
    return out
