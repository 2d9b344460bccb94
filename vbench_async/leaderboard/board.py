"""The index page's board: per run its ranks, its model's facts (`model_facts`: the optional columns and the size
band) and short badges; the benchmark groups a reader can switch between; each column's chance level.

The numbers themselves come from `tables.board_of` (the same rows as the CSV/JSON exports), keyed by column id; this
module only decides how they are laid out and labelled, and reads every cell by its column id, never by position.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from ..scoring.answer_extraction import answer_tag
from .load import CARDS, Run
from .model_facts import model_facts, size_band
from .ranks import average_ranks, column_scores, dense_ranks, rank_text

ALL = "all shown"
_SHORT_BADGE = 22  # characters of a badge shown; the whole text is its tooltip


def truth_text(answer: Any) -> str:
    """A ground truth as a reader wants it: the answer inside `<answer>...</answer>`, not the tag around it."""
    if answer is None:
        return ""
    text = answer if isinstance(answer, str) else str(answer)
    inner = answer_tag(text)
    return inner if inner else text


@dataclass(frozen=True)
class Badge:
    text: str  # what the cell shows
    title: str  # the whole marker, on hover


def badge(marker: str) -> Badge:
    """A marker shortened to fit a compact cell: a config letter keeps its first setting (the name's last part) and
    how many more differ, which a cut never drops."""
    text, more = marker, ""
    if marker.startswith("config") and ": " in marker:
        settings = [_short_setting(s) for s in marker.split(": ", 1)[1].split(", ")]
        text, more = settings[0], (f" +{len(settings) - 1}" if len(settings) > 1 else "")
    room = _SHORT_BADGE - len(more)
    if len(text) > room:
        text = text[: room - 1] + "…"
    return Badge(text + more, marker)


def _short_setting(setting: str) -> str:
    """`frames.max_frames=8` -> `max_frames=8`, `recipe="qwen3-vl v1"` -> `recipe=qwen3-vl v1`: split at "=" first,
    as a value has dots of its own (temperature=0.7)."""
    name, eq, value = setting.strip().partition("=")
    if len(value) > 1 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return name.rsplit(".", 1)[-1] + eq + value


def recipe_tag(label: str | None) -> str | None:
    """What a score shows of its evaluation recipe (`load.recipe_label`): the recipe's label; nothing for the cards'
    own settings (the common case, named in the tooltip only) or a run without a manifest."""
    return label if label not in (None, CARDS) else None


def lay_out(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """Give each board row its model facts (`facts`), size band (`size`) and badges and each cell (`row["cells"]`:
    column id -> cell) its flags, in place; `columns` are the board's column ids in order.

    A config letter is a mark only where it is the exception: cells whose settings match most runs of their column
    carry none, the others are marked (`cfg`) and their row gets one short badge naming the setting that differs."""
    usual: dict[str, str | None] = {}
    for cid in columns:
        counts = Counter(c["config_group"] for r in rows if (c := r["cells"].get(cid)) and c["config_group"])
        usual[cid] = counts.most_common(1)[0][0] if counts else None
    for row in rows:
        row["facts"] = model_facts(row["run"])
        row["size"] = size_band(row["facts"])
        notes: dict[str, Badge] = {}  # one badge per text: benchmarks whose notes read the same once shortened
        cells: dict[str, dict[str, Any]] = {}
        for cid in columns:
            cell = row["cells"].get(cid)
            if cell is None:
                continue
            markers = [m for m in (cell["markers"] or "").split("; ") if m]
            config = next((m for m in markers if m.startswith("config ")), None)
            odd = bool(config) and cell["config_group"] != usual[cid]
            if odd and config:
                shown = badge("config: " + (config.split(": ", 1)[1] if ": " in config else config))
                notes.setdefault(shown.text, shown)
            cells[cid] = {**cell, "config_odd": odd, "flags": [m for m in markers if not m.startswith("config ")],
                          "tooltip": "; ".join(markers)}
        row["cells"] = cells
        row["badges"] = [badge(m) for m in row["run"].markers] + list(notes.values())


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


def rank(grid: list[dict[str, Any]], views: list[dict[str, Any]]) -> None:
    """Set each row's `rank` (1 = best) by its score in the first view's average and its `avg_rank` (the mean of its
    ranks over that view's benchmarks); give each view its average ranks by run id ([value, text]) for the page's
    script, which shows the view the reader picks."""
    for view in views:
        ranks = average_ranks(grid, view["members"])
        view["avg_rank"] = {row["run"].id: [r, rank_text(r)] for row, r in zip(grid, ranks)}
    first = views[0] if views else {"avg": None, "avg_rank": {}}
    places = dense_ranks(column_scores(grid, first["avg"])) if first["avg"] else [None] * len(grid)
    for row, place in zip(grid, places):
        row["rank"] = place
        row["avg_rank"] = first["avg_rank"].get(row["run"].id, [None, rank_text(None)])


def chances(runs: list[Run], columns: Sequence[dict[str, Any]],
            suites: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Per column id: the chance level of its benchmark (`scoring.chance`, as the summary records it; suites: the mean
    of their members', free-form ones as 0). `free` marks a column whose answers are free-form."""
    per: dict[str, float | None] = {}
    seen: set[str] = set()
    for r in runs:
        for bid, b in r.benchmarks.items():
            if b.aggregate.chance_recorded:
                seen.add(bid)
                if b.aggregate.chance is not None:
                    per.setdefault(bid, float(b.aggregate.chance))
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
