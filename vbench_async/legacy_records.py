"""The predecessor's (EasyVideoR1) training-record layout -> the unified record layout.

Its training files name the ground truth `answer` (not `solution`) and the media `videos` / `images` (lists, not
`path` / `image_path`), put `<video>` / `<image>` placeholders into the question text, and mark offline responses
with `has_offline_trajectory` + `offline_output`. `convert_record` maps one such record onto the unified fields;
training reads these files directly, and `vbench-async data convert` writes a converted copy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import SampleError
from .failure_kinds import FailureKind

_PLACEHOLDER = re.compile(r"[ \t]*<(?:video|image)>[ \t]*\n?")
# Fields consumed by the conversion (everything else is kept as it is).
_CONSUMED = ("answer", "videos", "images", "has_offline_trajectory", "offline_output", "preprocessed_video")


def is_legacy(record: Any) -> bool:
    """True for a record in the predecessor's training layout (`answer` instead of `solution`, or media lists)."""
    if not isinstance(record, Mapping):
        return False
    return ("answer" in record and "solution" not in record) or isinstance(record.get("videos"), list) \
        or isinstance(record.get("images"), list)


def _one_path(record: Mapping[str, Any], key: str, index: int, many: bool) -> list[str]:
    value = record.get(key)
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: {key} must be a list of paths")
    paths = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            kind = "bytes" if isinstance(item, Mapping) else type(item).__name__
            raise SampleError(FailureKind.RECORD_INVALID,
                              f"record #{index}: {key} holds {kind}, not a file path (write embedded media to files "
                              "first)")
        paths.append(item.strip())
    if len(paths) > 1 and not many:
        raise SampleError(FailureKind.RECORD_INVALID,
                          f"record #{index}: {len(paths)} {key}; one video per record is supported (split the record)")
    return paths


def convert_record(record: Any, index: int) -> dict[str, Any]:
    """The unified-layout equivalent of a predecessor record; SampleError("record_invalid") if it has none.

    `answer` -> `solution`, `videos[0]` -> `path`, `images` -> `image_path` (a list when several), the placeholders
    are removed from `problem` (the prompt places the media itself), `offline_output` -> `offline_response` when
    `has_offline_trajectory` is set. A record already in the unified layout is returned unchanged.
    """
    if not isinstance(record, Mapping):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index} is a {type(record).__name__}, not an object")
    if not is_legacy(record):
        return dict(record)
    videos = _one_path(record, "videos", index, many=False)
    images = _one_path(record, "images", index, many=True)
    if videos and images:
        raise SampleError(FailureKind.RECORD_INVALID,
                          f"record #{index}: both videos and images (the predecessor rejects this too); split the "
                          "record")
    out = {k: v for k, v in record.items() if k not in _CONSUMED}
    if "solution" not in record:
        answer = record.get("answer")
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: answer must be a string")
        out["solution"] = answer
    problem = record.get("problem")
    if isinstance(problem, str):
        out["problem"] = _PLACEHOLDER.sub(" ", problem).strip()
    if videos:
        out["path"] = videos[0]
    if images:
        out["image_path"] = images[0] if len(images) == 1 else images
    if record.get("has_offline_trajectory") and record.get("offline_output"):
        out.setdefault("offline_response", record["offline_output"])
    return out


@dataclass
class ConvertReport:
    records: int = 0
    converted: int = 0  # records that were in the predecessor's layout
    unchanged: int = 0  # records already in the unified layout
    errors: list[str] = field(default_factory=list)


def convert_file(src: Path, dst: Path) -> ConvertReport:
    """Convert a JSON/JSONL training file; JSONL out (JSON when `dst` ends in .json). Unconvertible records are
    listed in the report and left out of `dst`, and written as they were to `<dst>.failed.jsonl`."""
    from .samples import iter_records

    report = ConvertReport()
    out: list[dict[str, Any]] = []
    failed: list[Any] = []
    for i, rec in enumerate(iter_records(src)):
        report.records += 1
        try:
            converted = convert_record(rec, i)
        except SampleError as exc:
            report.errors.append(str(exc))
            failed.append(rec)
            continue
        if is_legacy(rec):
            report.converted += 1
        else:
            report.unchanged += 1
        out.append(converted)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.suffix == ".json":
        dst.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    else:
        dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    failed_path = dst.with_name(dst.name + ".failed.jsonl")
    if failed:
        failed_path.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in failed),
                               encoding="utf-8")
    else:
        failed_path.unlink(missing_ok=True)
    return report
