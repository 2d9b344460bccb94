"""`Sample`: one benchmark question, parsed from an annotation record, and the parser of the unified format.

The unified format is the predecessor's (EasyVideoR1) JSON/JSONL record: `problem`, `options`, `solution`,
`problem_type`, `path`, `problem_id`, plus per-benchmark extras. Every other loader (hub releases, the demo
generator) produces the same `Sample`, so nothing downstream knows where a record came from.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from .errors import SampleError
from .failure_kinds import FailureKind

# Keys that are parsed into Sample attributes; everything else is kept in `fields` (categories, quirks).
_CORE_KEYS = {"problem_id", "problem", "problem_type", "options", "solution", "path", "image_path", "data_type"}
# An option's letter prefix: "A. ", "A: ", "(A) ", "A) ", and TempCompass's caption-matching "Caption A: " /
# "Sentence A: " / "Option A: ". One pattern for samples, the letter parser and the hub loader.
OPTION_LABEL = r"(?:(?:Caption|Sentence|Option)\s+)?\(?([A-Z])"
OPTION_PREFIX = re.compile(rf"^\s*{OPTION_LABEL}\s*[\.\):：]\s*", re.ASCII)
_OPTION_RE = OPTION_PREFIX


@dataclass(frozen=True, slots=True)
class Sample:
    """One question of one benchmark. Immutable; safe to share across coroutines and processes. Slotted: a run holds
    one per question (tens of thousands for a large suite), so no per-instance __dict__."""

    benchmark: str
    sample_id: str
    task_type: str  # the record's problem_type, as written; scoring maps aliases to canonical types
    question: str
    answer: str  # raw ground truth (`solution`), e.g. "<answer>B</answer>"; scorers parse it
    options: tuple[str, ...] = ()  # as written, each with its own letter prefix ("A. text" or "A: text")
    video: str | None = None  # path relative to the benchmark's video root (or absolute if allowed)
    window: tuple[float | None, float | None] | None = None  # (start, end) seconds to sample from, if any
    images: tuple[str, ...] = ()  # extra images shown after the video (VideoMMMU)
    fields: Mapping[str, Any] = field(default_factory=dict)  # category fields and extras (ovo_type, duration, ...)

    @property
    def key(self) -> str:
        """Unique id within a run: benchmark and sample id."""
        return f"{self.benchmark}/{self.sample_id}"

    @property
    def option_letters(self) -> list[str]:
        """The letters the options actually use, in order (["A", "B", "C"] for three options)."""
        letters = []
        for i, opt in enumerate(self.options):
            m = _OPTION_RE.match(opt)
            letters.append(m.group(1) if m else chr(ord("A") + i))
        return letters

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fields"] = dict(self.fields)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        window = d.get("window")
        return cls(
            benchmark=d["benchmark"],
            sample_id=d["sample_id"],
            task_type=d["task_type"],
            question=d["question"],
            answer=d["answer"],
            options=tuple(d.get("options") or ()),
            video=d.get("video"),
            window=tuple(window) if window is not None else None,
            images=tuple(d.get("images") or ()),
            fields=dict(d.get("fields") or {}),
        )


def _parse_options(raw: Any) -> tuple[str, ...]:
    """Options arrive as a list, null, "[]", "None", or a Python-literal string of a list (hand-edited files)."""
    if raw is None:
        return ()
    if isinstance(raw, str):
        text = raw.strip()
        if text in ("", "[]", "None", "null"):
            return ()
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            try:
                raw = ast.literal_eval(text)  # literal_eval never executes code
            except (ValueError, SyntaxError) as exc:
                raise SampleError(FailureKind.RECORD_INVALID, f"options is not a list: {text[:80]!r}") from exc
    if not isinstance(raw, (list, tuple)):
        raise SampleError(FailureKind.RECORD_INVALID, f"options must be a list, got {type(raw).__name__}")
    if not all(isinstance(o, str) for o in raw):
        raise SampleError(FailureKind.RECORD_INVALID, "every option must be a string")
    return tuple(raw)


def _as_seconds(value: Any, name: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError) as exc:
        raise SampleError(FailureKind.RECORD_INVALID, f"{name} must be a number of seconds, got {value!r}") from exc
    if not math.isfinite(seconds) or seconds < 0:
        raise SampleError(FailureKind.RECORD_INVALID, f"{name} must be a finite, non-negative number, got {value!r}")
    return seconds


def parse_record(record: Any, benchmark: str, index: int) -> Sample:
    """Parse one unified-format record into a Sample; raise SampleError(FailureKind.RECORD_INVALID, ...) if malformed.

    `index` is the record's position in its file, used as the id when `problem_id` is missing.
    """
    if not isinstance(record, Mapping):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index} is a {type(record).__name__}, not an object")
    # One walk of the whole record; the per-field one (for the message) only when it fails.
    bad = [] if _valid_text(record) else [ascii(k) for k, v in record.items()
                                          if not _valid_text(k) or not _valid_text(v)]
    if bad:
        raise SampleError(FailureKind.RECORD_INVALID,
                          f"record #{index}: {', '.join(bad)} hold(s) text that is not valid UTF-8 "
                          "(undecodable bytes, or a lone \\uD800-\\uDFFF escape)")
    missing = [k for k in ("problem_type", "solution") if k not in record]
    if missing:
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index} lacks required field(s): {', '.join(missing)}")
    problem_type = record["problem_type"]
    if not isinstance(problem_type, str) or not problem_type.strip():
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: problem_type must be a non-empty string")
    question = record.get("problem", "")
    if not isinstance(question, str):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: problem must be a string")
    solution = record["solution"]
    if isinstance(solution, (int, float)) and not isinstance(solution, bool):
        solution = str(solution)
    if not isinstance(solution, str):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: solution must be a string")
    path = record.get("path")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: path must be a non-empty string")
    image = record.get("image_path")
    images = tuple(image) if isinstance(image, list) else (image,) if image else ()
    if image is not None and not all(isinstance(im, str) and im for im in images):
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: image_path must be a path or a list of paths")
    pid = record.get("problem_id", index)
    sample_id = str(pid) if isinstance(pid, (str, int)) and not isinstance(pid, bool) else str(index)

    start = _as_seconds(record.get("start"), "start")
    end = _as_seconds(record.get("end"), "end")
    if start is not None and end is not None and end <= start:
        raise SampleError(FailureKind.RECORD_INVALID, f"record #{index}: end ({end}) must be after start ({start})")
    window = (start, end) if (start is not None or end is not None) else None

    extras = _shared_fields({k: v for k, v in record.items() if k not in _CORE_KEYS})
    return Sample(
        benchmark=benchmark,
        sample_id=sample_id,
        task_type=sys.intern(problem_type.strip()),
        question=question,
        answer=_interned(solution),  # "<answer>B</answer>" and the like recur across a suite
        options=_shared_options(_parse_options(record.get("options"))),
        video=sys.intern(path.strip()) if path else None,  # shared by the questions on one video
        window=window,
        images=images,
        fields=extras,
    )


def _interned(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value


_FIELDS: dict[tuple[Any, ...], dict[str, Any]] = {}  # shared `fields` dicts: samples are immutable, never written


def _shared_fields(extras: dict[str, Any]) -> dict[str, Any]:
    """One dict per distinct set of extra fields: the questions of a suite repeat a few categories, so 10,000
    samples share a handful of dicts instead of holding one each (keys and short values interned)."""
    if not all(isinstance(v, (str, int, float, bool, type(None))) for v in extras.values()):
        return {sys.intern(k): _interned(v) for k, v in extras.items()}
    key = tuple((k, type(v), v) for k, v in extras.items())  # typed: 1, 1.0 and True are equal, not the same
    shared = _FIELDS.get(key)
    if shared is None:
        if len(_FIELDS) >= 65536:  # a bound, for suites whose every record is different
            _FIELDS.clear()
        shared = _FIELDS[key] = {sys.intern(k): _interned(v) for k, v in extras.items()}
    return shared


_OPTIONS: dict[tuple[str, ...], tuple[str, ...]] = {}  # shared option tuples, as `_FIELDS` shares fields


def _shared_options(options: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple per distinct list of options: yes/no and "A. 1 / B. 2 / ..." options recur across a suite's questions,
    and a plan holds every sample (a question's four options are ~300 bytes)."""
    if not options:
        return ()
    shared = _OPTIONS.get(options)
    if shared is None:
        if len(_OPTIONS) >= 65536:  # a bound, for suites whose every question has its own options
            _OPTIONS.clear()
        shared = _OPTIONS[options] = options
    return shared


def read_records(path: Path) -> list[Any]:
    """All records of a JSON array, a single JSON object, or a JSONL file (SampleError on bad syntax)."""
    return list(iter_records(path))


def iter_records(path: Path) -> Iterator[Any]:
    """Stream the records of a JSON array, a single JSON object, or a JSONL file, one at a time (a large file is never
    held whole). Raises SampleError on bad syntax in a JSON file, when the iteration reaches it.

    A bad record hurts only itself: in JSONL every line is parsed on its own, and bytes that are not UTF-8 are kept
    as lone surrogates (surrogateescape) so that `parse_record` rejects just the record holding them.
    """
    from .jsonstream import iter_json_array

    # -sig: a BOM from a Windows editor. newline="\n": split lines on "\n" only, as JSON Lines does (str.splitlines()
    # would also split on U+2028, U+0085 and form feeds, which JSON strings may hold unescaped).
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as fh:
        if path.suffix == ".jsonl":
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested deeper than allowed
                    # Keep the line as a broken record so it is counted and reported, not silently skipped.
                    yield _BrokenLine(lineno, str(exc))
            return
        try:
            yield from iter_json_array(fh)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise SampleError(FailureKind.RECORD_INVALID, f"{path} is not valid JSON: {exc}") from exc


def _valid_text(value: Any) -> bool:
    """False if any string in `value` (keys included) holds a lone surrogate: bytes that were not UTF-8, or an
    escape such as \\ud800 that encodes no character. Such text cannot be written to result files or pages."""
    stack = [value]
    while stack:  # iterative: a record may be nested as deep as the JSON parser allows
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


@dataclass(frozen=True)
class _BrokenLine:
    lineno: int
    error: str


def iter_samples(records: Iterable[Any], benchmark: str) -> Iterator[Sample | SampleError]:
    """Yield a Sample per valid record and a SampleError per invalid one, in file order."""
    for i, rec in enumerate(records):
        yield sample_from(rec, benchmark, i)


def broken_line(rec: Any) -> str | None:
    """Why a record read from a JSONL file is not JSON ("line 3 is not valid JSON: ..."), None for a parsed one."""
    return f"line {rec.lineno} is not valid JSON: {rec.error}" if isinstance(rec, _BrokenLine) else None


def sample_from(rec: Any, benchmark: str, index: int) -> Sample | SampleError:
    """The record at position `index` as a Sample, or the SampleError that says why it is not one (with an id)."""
    broken = broken_line(rec)
    if broken is not None:
        err = SampleError(FailureKind.RECORD_INVALID, broken)
        err.sample_id = f"#{index}"
        return err
    try:
        return parse_record(rec, benchmark, index)
    except SampleError as exc:
        pid = rec.get("problem_id") if isinstance(rec, Mapping) else None
        pid = pid if _valid_text(pid) else None  # an id that cannot be written falls back to the position
        # An invalid record still needs a stable id so its failure is stored (and resumed) like any result.
        exc.sample_id = str(pid) if isinstance(pid, (str, int)) and not isinstance(pid, bool) else f"#{index}"
        return exc
