"""`data validate`: check every record of an annotation file before a run, with one clear error per bad record.

A record is valid when it parses, its problem type is known to the scorers and belongs to the benchmark, its ground
truth reads with the same code that scores outputs, its prompt renders, and its media paths stay inside their root.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..samples import Sample, read_records
from .registry import Benchmark
from .sources import as_unified, to_samples


@dataclass(frozen=True)
class RecordError:
    index: int  # position in the file (0-based)
    sample_id: str | None
    kind: str
    message: str


@dataclass
class Report:
    file: str
    benchmark: str
    records: int = 0
    valid: int = 0
    errors: list[RecordError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.records > 0 and self.valid == self.records

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "benchmark": self.benchmark, "records": self.records, "valid": self.valid,
                "errors": [asdict(e) for e in self.errors]}


def _check_path(value: str, what: str) -> None:
    path = Path(value)
    if path.is_absolute() or ".." in path.parts:
        raise SampleError(FailureKind.PATH_UNSAFE,
                          f"{what} path {value!r} must be relative to its folder, without '..'")


def check_sample(bench: Benchmark, sample: Sample) -> None:
    """Raise SampleError (or UnknownTaskType) for the first problem of one parsed sample."""
    from ..scoring import UnknownTaskType, canonical_task_type
    from ..scoring import check_sample as check_ground_truth

    canonical = canonical_task_type(sample.task_type)
    allowed = {}
    for t in bench.card.task_types:
        try:
            allowed[canonical_task_type(t)] = t
        except UnknownTaskType:
            allowed[t] = t
    if canonical not in allowed:
        raise SampleError(FailureKind.TASK_TYPE_MISMATCH,
                          f"problem type {sample.task_type!r} is not one of {bench.id}'s task types "
                          f"({', '.join(bench.card.task_types)})")
    check_ground_truth(sample)
    bench.render_prompt(sample)
    if sample.video:
        _check_path(sample.video, "video")
    for image in sample.images:
        _check_path(image, "image")


def check_records(records: list[Any], bench: Benchmark, file: str = "") -> Report:
    """Check records already read from `file` (used by `data validate` and by tests on in-memory records)."""
    from ..scoring import UnknownTaskType

    records = as_unified(records, bench.card, Path(file or ".").parent / ".vbench-images")
    report = Report(file=file, benchmark=bench.id, records=len(records))
    for index, item in enumerate(to_samples(list(records), bench.card)):  # a copy: to_samples consumes it
        try:
            if isinstance(item, SampleError):
                raise item
            check_sample(bench, item)
        except UnknownTaskType as exc:
            report.errors.append(RecordError(index, item.sample_id, "unknown_task_type", str(exc)))
        except SampleError as exc:
            report.errors.append(RecordError(index, exc.sample_id or getattr(item, "sample_id", None), exc.kind,
                                             str(exc)))
        else:
            report.valid += 1
    return report


def check_file(path: Path, bench: Benchmark) -> Report:
    if not path.is_file():
        raise UserError(f"no such annotation file: {path}")
    try:
        records = read_records(path)
    except SampleError as exc:  # the whole file is unreadable: one error, zero records
        report = Report(file=str(path), benchmark=bench.id)
        report.errors.append(RecordError(-1, None, exc.kind, str(exc)))
        return report
    return check_records(records, bench, str(path))
