"""`Result`: what one sample ended as, and the one shape of a line in `results/*.jsonl`.

Every sample ends as exactly one result, a failure included (`error` set, `score` None). The completion's fields
(tokens, finish reason, latency) are present only when the model answered. Readers get the lines back as dicts
(`results.store.read_results`); `Result.from_dict` turns one into the record again.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping

# Written only when the model answered: a line without them is a failure before any request.
COMPLETION_FIELDS = ("prompt_tokens", "output_tokens", "finish_reason", "latency_s")


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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FramesSeen":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
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

    def to_dict(self) -> dict[str, Any]:
        """The JSON line (without the completion fields when there was no completion)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.prompt_tokens is None:
            for name in COMPLETION_FIELDS:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, line: Mapping[str, Any]) -> "Result":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in line.items() if k in names})


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def result_schema() -> dict[str, Any]:
    """The JSON Schema of a result line, read off the `Result` fields (so the two cannot drift apart)."""
    schema = _object_schema(Result)
    schema["properties"]["frames"].update({k: v for k, v in _object_schema(FramesSeen).items() if k != "type"})
    return schema


def _object_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        kinds = []
        for m in members:
            base = typing.get_origin(m) or m
            if base is type(None):
                kinds.append("null")
            elif base in _JSON_TYPES:
                kinds.append(_JSON_TYPES[base])
        properties[f.name] = {"type": kinds if len(kinds) > 1 else kinds[0]} if kinds else {}
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return {"type": "object", "properties": properties, "required": required}
