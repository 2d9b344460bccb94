"""`Result`: what one sample ended as, and the one shape of a line in `results/*.jsonl`.

Every sample ends as exactly one result, a failure included (`error` set, `score` None). The completion's fields
(tokens, finish reason, latency) are present only when the model answered. Lines are read back into `Result`
(`Result.read`, through `results.store.read_results`), checked against the dataclass's own fields, so writing and
reading share one declaration; the methods below are the only code that reads a line's readings and judge flags
(as typed records: `Result.reading` gives a `scoring.Reading`, `Result.judge_verdict` an `AppliedVerdict`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .failure_kinds import FailureKind, is_final_kind
from .record_io import field_kinds, json_schema, type_problem
from .scoring.base import Reading

# Written only when the model answered: a line without them is a failure before any request.
COMPLETION_FIELDS = ("prompt_tokens", "output_tokens", "finish_reason", "latency_s")
# The two readings of an output (scoring.Reading as a dict): the benchmark's own protocol and the careful grader.
READINGS = ("official", "robust")
INVALID_TASK = "invalid"  # the task type of the line of a record that is not a sample (the runner writes its stub)
# A field with this metadata belongs to a view of a line (`Result.seen_as`), never to the stored line.
_VIEW = {"view": True, "json": False}


@dataclass
class FramesSeen:
    """What the model received of the sample's video: which source frames, when, at what size, from which cache entry.

    Stored as `Result.frames` (a dict of these fields); the site draws its frame strip from it. Lines written before
    this field existed have no `frames` and read back as None.
    """

    n: int  # frames sent
    indices: list[int]  # source frame number of each frame (absolute: a window does not shift them)
    timestamps: list[float]  # seconds into the source video of each frame
    size: list[int]  # [height, width] of the frames as sent (after resizing)
    source_size: list[int]  # [height, width] of the source video
    fps: float  # source average fps
    duration: float  # seconds of the whole source video
    cache_key: str  # frame-cache entry holding exactly these frames
    window: list[float | None] | None = None  # the clip window [start, end] in seconds, when the sample has one
    requested: int = 0  # frames the benchmark's rule asked for (more than `n` when the video was too short)
    source: str | None = None  # the video file as resolved when the run read it
    ablation: str | None = None  # the input ablation applied to these frames (frames/ablation.py), if any

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["ablation"] is None:  # a real run's lines stay as they were
            del d["ablation"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FramesSeen:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def read(cls, value: Any) -> FramesSeen | None:
        """A result line's `frames` as the record, checked against the fields' types: None when the line has none
        or one no reader can trust (not an object, a field missing or of the wrong type: edited by hand), so a
        reader shows no frames instead of failing. The line reader checks only that `frames` is an object."""
        if not isinstance(value, Mapping):
            return None
        missing = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING and value.get(f.name) is None]
        if missing or type_problem(FramesSeen, value) is not None:
            return None
        return cls.from_dict(value)


@dataclass(frozen=True)
class AppliedVerdict:
    """An LLM judge's verdict as applied to a line: `Result.details["judge"]` (a dict of these fields, in this order),
    written by `results.verdicts.judge_line` when the verdict replaced the offline score."""

    verdict: str | None = None  # "correct" / "incorrect", or the protocol's own label
    judge_id: str | None = None
    prompt_hash: str | None = None
    protocol: str | None = None
    offline_score: float | None = None  # the score the line had before the verdict

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AppliedVerdict:
        """The stored dict; a key a hand-made line lacks takes its default, an unknown key is ignored."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


class BadResult(ValueError):
    """A mapping that is not a result line (the message says which field is wrong)."""


@dataclass(slots=True)
class Result:
    sample_id: str
    benchmark: str
    config_hash: str  # the result file's config: model, frames, prompt, thinking, sampling
    task_type: str
    question: str
    options: list[str]
    answer: str  # the raw ground truth, as the sample holds it
    video: str | None
    fields: dict[str, Any]  # the sample's category fields and extras
    prompt: str
    output: str | None = None
    extracted: str | None = None  # the answer read from the output
    score: float | None = None  # in [0, 1]; None for a failure
    well_formed: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # the metric's parts (JSON-serialisable)
    # The two readings of the output (scoring.Reading as a dict): the benchmark's own protocol and the careful grader.
    official: dict[str, Any] | None = None
    robust: dict[str, Any] | None = None
    error: dict[str, str] | None = None  # {"kind": stable label, "message": the cause}
    frames: dict[str, Any] | None = None  # FramesSeen as a dict; None without a video (or before frames loaded)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float | None = None
    # Set only on a view through one reading (`seen_as`): which reading, the score the scorer wrote, and whether that
    # reading leaves the item out of the official denominators (an empty MVBench / Video-MMMU prediction).
    seen_reading: str | None = field(default=None, metadata=_VIEW)
    line_score: float | None = field(default=None, metadata=_VIEW)
    dropped: bool = field(default=False, metadata=_VIEW)

    # -- the stored form ---------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON line (without the completion fields when there was no completion)."""
        out = {f.name: getattr(self, f.name) for f in stored_fields()}
        if self.prompt_tokens is None:
            for name in COMPLETION_FIELDS:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, line: Mapping[str, Any]) -> Result:
        """The record of a line written by `to_dict` (see `read` for lines of any age, checked)."""
        return cls.read(line)

    @classmethod
    def read(cls, line: Mapping[str, Any]) -> Result:
        """A stored line as the record, checked against the fields' types (BadResult names the first wrong one).

        Fields a writer always sets may be absent or null in older lines and read as empty; unknown keys are
        ignored."""
        problem = result_problem(line)
        if problem is not None:
            raise BadResult(problem)
        kwargs: dict[str, Any] = {}
        for f in stored_fields():
            v = line.get(f.name)
            if v is None:
                if f.default_factory is not dataclasses.MISSING:
                    v = f.default_factory()
                elif f.default is not dataclasses.MISSING:
                    v = f.default
                elif f.name not in _NULLABLE:
                    v = _EMPTY.get(f.name, str)()  # an older line without it: empty, never a None the type denies
            elif isinstance(v, tuple):
                v = list(v)
            kwargs[f.name] = v
        for f in dataclasses.fields(cls):  # a view handed in as a mapping (a test's aggregation input) keeps its marks
            if f.metadata.get("view") and line.get(f.name) is not None:
                kwargs[f.name] = line[f.name]
        return cls(**kwargs)

    @classmethod
    def of(cls, line: Result | Mapping[str, Any]) -> Result:
        """`line` as a Result (a Result is returned as it is). An in-memory line without an id (a hand-made one, as
        aggregation tests pass) reads as "(unnamed)"; a stored line always has one (`results.lines`)."""
        if isinstance(line, Result):
            return line
        return cls.read(line if "sample_id" in line else {**line, "sample_id": "(unnamed)"})

    # -- what a line says --------------------------------------------------------------------------------------------
    @property
    def failed(self) -> bool:
        return bool(self.error)

    @property
    def error_kind(self) -> str | None:
        return self.error.get("kind") if self.error else None

    def frames_seen(self) -> FramesSeen | None:
        """The frames the model received (None: no video, a line from before frames were recorded, or a frames
        record no reader can trust)."""
        return FramesSeen.read(self.frames)

    @property
    def error_message(self) -> str:
        """The failure's cause ("" when the line did not fail, or its error has no message)."""
        return str(self.error.get("message") or "") if self.error else ""

    def reading(self, name: str) -> Reading | None:
        """The `official` or `robust` reading as the record (None where the line has none: no official code, an older
        line). The line keeps the stored dict, so it is written back exactly as read."""
        rd = self.official if name == "official" else self.robust if name == "robust" else None
        if rd is None and name not in READINGS:
            raise ValueError(f"unknown reading {name!r}; known: {', '.join(READINGS)}")
        return Reading.from_dict(rd) if isinstance(rd, Mapping) else None

    def judge_verdict(self) -> AppliedVerdict | None:
        """The judge's verdict applied to the line (`details["judge"]`), or None when none replaced its score."""
        found = self.details.get("judge")
        return AppliedVerdict.from_dict(found) if isinstance(found, Mapping) and found else None

    def field_value(self, name: str) -> Any:
        """A category field of the sample (None when absent or empty)."""
        v = self.fields.get(name)
        return None if v in (None, "") else v

    @property
    def judged(self) -> bool:
        """A judge's verdict has replaced the offline score (`results.verdicts.apply_judgements`)."""
        return self.judge_verdict() is not None

    def needs_judge(self) -> bool:
        """The item is one an LLM judge decides (before any verdict): its free text has no careful reading, or its
        official reading hands it to the judge. On a view through one reading, that reading's own wait."""
        if self.failed:
            return False
        waits = bool(self.details.get("needs_judge"))
        if self.seen_reading is not None:
            return waits
        official = self.reading("official")
        return waits or (official is not None and official.needs_judge)

    def awaits_judge(self) -> bool:
        """The item needs a judge and no verdict has been applied yet."""
        return self.needs_judge() and not self.judged

    def value_under(self, reading: str) -> float | None:
        """The score under one reading: the reading's value; where the reading waits for an LLM judge, the judge's
        verdict once one ran (None until then); the line's own score where it has no such reading (a benchmark
        without official code, a line written before the two readings)."""
        return self._value_under(self.reading(reading))

    def _value_under(self, rd: Reading | None) -> float | None:
        if rd is None or (rd.value is None and not rd.needs_judge):
            return self.score
        if rd.value is not None:
            return float(rd.value)
        return self.score if self.judged else None

    def seen_as(self, reading: str) -> Result:
        """The line as one reading scores it: `score` is that reading's value and `needs_judge` its own wait for a
        judge, so any aggregation of lines gives that reading's numbers; `line_score` keeps the value the scorer
        wrote (the STVG aggregate reports EasyVideoR1's combined score from it)."""
        rd = self.reading(reading)
        if self.failed or rd is None:
            return self
        details = self.details
        waits = rd.needs_judge and rd.value is None and not self.judged
        if bool(details.get("needs_judge")) != waits:
            details = {**details, "needs_judge": waits}
        return dataclasses.replace(self, score=self._value_under(rd), line_score=self.score,
                                   seen_reading=reading, details=details, dropped=rd.dropped)

    @property
    def scorer_score(self) -> float | None:
        """The value the scorer wrote, whichever reading the line is seen through."""
        return self.line_score if self.seen_reading is not None else self.score


def is_final(result: Result) -> bool:
    """Whether a result line settles its sample: no error, or an error the input itself caused."""
    return not result.failed or is_final_kind(result.error_kind)


def as_results(lines: Iterable[Result | Mapping[str, Any]]) -> list[Result]:
    return [Result.of(r) for r in lines]


def stored_fields() -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(Result) if not f.metadata.get("view"))


_EMPTY: dict[str, Any] = {"options": list, "fields": dict}
_NULLABLE = {name for name, kind in field_kinds(Result).items() if kind.nullable}


def record_problem(line: Any) -> str | None:
    """Why `line` is not a line of a results or judge file at all (not an object, no sample id), or None."""
    if not isinstance(line, Mapping):
        return f"a {type(line).__name__}, not an object"
    sid = line.get("sample_id")
    if not isinstance(sid, str) or not sid:
        return "no sample_id string"
    return None


def result_problem(line: Any, config_hash: str | None = None) -> str | None:
    """Why `line` is not a result line (of a file of `config_hash`, when given), or None when it is: each field
    against its declared type (absent or null allowed for what older lines lack), a score a finite number in [0, 1],
    an error with a kind and a message."""
    if (problem := record_problem(line)) is not None:
        return problem
    problem = type_problem(Result, line) or score_problem(line.get("score")) or error_problem(line.get("error"))
    if problem is None and config_hash is not None and line.get("config_hash") != config_hash:
        return f"config_hash {line.get('config_hash')!r} does not match the file's {config_hash}"
    return problem


def failure_kind_of(line: Mapping[str, Any]) -> str | None:
    """A checked stored line's failure kind ("unknown" for an error without one), None where the model answered:
    what a resuming run reads of each line without building the record."""
    error = line.get("error")
    return str(error.get("kind") or "unknown") if error else None


def is_invalid_record_line(line: Mapping[str, Any]) -> bool:
    """The line is the `record_invalid` stub of a record that is not a sample (task type `INVALID_TASK`), not that
    of a sample whose answer could not be scored."""
    return failure_kind_of(line) == FailureKind.RECORD_INVALID and line.get("task_type") == INVALID_TASK


def score_problem(score: Any) -> str | None:
    """Why `score` is not a score (None: absent, or a finite number in [0, 1]); a verdict line's too."""
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return f"score is a {type(score).__name__}"
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        return f"score {score!r} is not a finite number in [0, 1]"
    return None


def error_problem(error: Any) -> str | None:
    """Why `error` is not a failure record (None: absent, or an object with a kind and a message)."""
    if error is None:
        return None
    if not isinstance(error, Mapping) or not isinstance(error.get("kind"), str) \
            or not isinstance(error.get("message", ""), str):
        return "error is not an object with a kind and a message"
    return None


def result_schema() -> dict[str, Any]:
    """The JSON Schema of a result line, read off the `Result` fields (so the two cannot drift apart)."""
    schema = json_schema(Result)
    schema["properties"]["frames"].update({k: v for k, v in json_schema(FramesSeen).items() if k != "type"})
    return schema
