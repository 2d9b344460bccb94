"""`new-benchmark NAME --from-records FILE`: a starter card for a user's own annotation file.

The task types come from the records' `problem_type`s (each mapped to its canonical type, so every one has a
scorer), the prompt template and the metric from those task types, and the category breakdowns from the extra
fields that take a few repeated values. The card is checked by the same parser and `check_card` as any card before
it is written, so `data validate` and `run --include` accept it as it is.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from ..errors import SampleError, UserError
from ..samples import broken_line, iter_records
from .card_check import check_card
from .cards import ID_RE, parse_card

# Record fields never offered as categories: the unified format's own keys and clip bounds.
_NOT_CATEGORIES = {"problem_id", "problem", "problem_type", "options", "solution", "path", "image_path", "data_type",
                   "start", "end"}
MAX_CATEGORY_VALUES = 20


def _records(path: Path) -> list[dict[str, Any]]:
    """Every record of the file; a line that is not JSON or a record that is not an object is refused, naming each
    (a card written without it would miss its task type, and nothing would say so)."""
    if not path.is_file():
        raise UserError(f"no such records file: {path}")
    records, bad = [], []
    try:
        for i, rec in enumerate(iter_records(path)):
            if isinstance(rec, dict):
                records.append(rec)
            else:
                bad.append(broken_line(rec) or f"record #{i} is a {type(rec).__name__}, not an object")
    except SampleError as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UserError(f"{path}: {len(bad)} record(s) cannot be read: {'; '.join(bad[:3])}{more}. No card was "
                        "written (it would miss what those records hold): fix them, then run new-benchmark again")
    if not records:
        raise UserError(f"{path}: no records (a JSON array or JSONL file of objects with problem_type and solution)")
    return records


def detect_task_types(records: list[dict[str, Any]], where: str) -> dict[str, int]:
    """{problem_type as spelled in the records: count}, most frequent first; every one must be known to the scorers."""
    from ..scoring import UnknownTaskType, canonical_task_type, known_task_types

    counts = Counter(r.get("problem_type") for r in records)
    for spelling in counts:
        if not isinstance(spelling, str) or not spelling.strip():
            raise UserError(f"{where}: a record has no problem_type (each record needs one; known types: "
                            f"{', '.join(known_task_types())})")
        try:
            canonical_task_type(spelling)
        except UnknownTaskType:
            raise UserError(f"{where}: problem type {spelling!r} is unknown to the scorers; known: "
                            f"{', '.join(known_task_types())} (or an alias of one)") from None
    return dict(counts.most_common())


def _categories(records: list[dict[str, Any]]) -> list[str]:
    """Extra fields every record has, holding short text with a few repeated values: the breakdowns to report."""
    keys = set(records[0]) - _NOT_CATEGORIES
    out = []
    for key in sorted(keys):
        values = [r.get(key) for r in records]
        if not all(isinstance(v, str) and 0 < len(v) <= 64 for v in values):
            continue
        distinct = len(set(values))
        if 1 < distinct <= min(MAX_CATEGORY_VALUES, max(2, len(values) // 2)):
            out.append(key)
    return out


def _path_for(path: Path, data_root: Path | None) -> str:
    """Relative to the data root when it is under it (a card that moves with its data), else absolute."""
    path = path.expanduser().resolve()
    if data_root is not None:
        root = data_root.expanduser().resolve()
        if path.is_relative_to(root):
            return str(path.relative_to(root)) or "."
    return str(path)


def starter_card(name: str, records_path: Path, video_dir: Path | None = None,
                 data_root: Path | None = None) -> dict[str, Any]:
    """The card's mapping (checked); `video_dir` defaults to the records file's folder."""
    from ..scoring import task_type

    if not ID_RE.match(name):
        raise UserError(f"benchmark name {name!r} must be lowercase letters, digits, '-' or '_' (it becomes the id)")
    records = _records(records_path)
    spellings = detect_task_types(records, str(records_path))
    types = {s: task_type(s) for s in spellings}
    templates = {s: t.template for s, t in types.items()}
    prompt: str | dict[str, str] = next(iter(templates.values()))
    if len(set(templates.values())) > 1:
        prompt = dict(templates)
    kinds = set(types.values())
    metrics = sorted({t.metric for t in kinds})
    aggregation: dict[str, Any] = {"kind": "micro"}
    if len(kinds) == 1 and (only := next(iter(kinds))).aggregation != "micro":
        aggregation = {"kind": only.aggregation, "thresholds": [0.3, 0.5, 0.7]}
    card: dict[str, Any] = {
        "id": name,
        "name": name,
        "description": f"{len(records)} records from {records_path.name} ({', '.join(spellings)}).",
        "sources": {"unified": {
            "annotation": _path_for(records_path, data_root),
            "video_dir": _path_for(video_dir or records_path.parent, data_root),
        }},
        "task_types": list(spellings),
        "prompt": prompt,
        "metric": " / ".join(metrics),
        "aggregation": aggregation,
        "frames": {"fps": 2.0, "max_frames": 32},
        "presets": {"8f": {"max_frames": 8}, "64f": {"max_frames": 64}},
    }
    categories = _categories(records)
    if categories:
        card["categories"] = categories
    check_card(parse_card(card))
    return card


def card_text(card: dict[str, Any], records_path: Path) -> str:
    header = (f"# Starter card written by `vbench-async new-benchmark {card['id']} --from-records {records_path}`.\n"
              "# Review it: the prompt template per task type, the metric, the categories and the frame settings.\n"
              "# Relative paths are relative to the data root (--data-root or $VBENCH_DATA_ROOT).\n"
              "# Use it with `--include` on the folder that holds it; docs/your-benchmarks.md.\n")
    return header + yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=120)
