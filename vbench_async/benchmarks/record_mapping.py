"""A hub record mapping (a card's `sources.hub.record`, and a hub file's overrides of it), declared field by field.

`settings.from_json` reads it like the rest of the card, so a misspelt key or a wrong kind fails when the card loads,
not on the first record of a fetched release; `hub.py` says what each key does. None is "not set": a hub file's
mapping sets only what it overrides (`RecordMapping.over`), and `hub.py` applies the defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

Scalar = str | int | float | bool  # a value a YAML card may compare a record field with


@dataclass(frozen=True)
class OptionsSpec:
    """Where a record's options are: a list, a letter -> text mapping, one column per option, or the question."""

    field: str | None = None  # the record field; not for columns and embedded
    kind: str = dataclasses.field(default="list", metadata={"choices": ("list", "dict", "columns", "embedded")})
    columns: tuple[str, ...] | None = None  # kind columns: one record field per option, in order
    sep: str = ". "  # between the letter and the text of an option written bare

    def __post_init__(self) -> None:
        if self.kind == "columns" and self.columns is None:
            raise ValueError("kind columns needs a 'columns' list")
        if self.kind not in ("columns", "embedded") and self.field is None:
            raise ValueError(f"options of kind {self.kind} need a 'field'")


@dataclass(frozen=True)
class AnswerSpec:
    """Where a record's answer is and how to read it."""

    field: str
    kind: str = dataclasses.field(default="letter", metadata={"choices": ("letter", "index", "raw", "time_span")})
    if_null: str | None = None  # what a null answer stands for (VideoReasonBench)


@dataclass(frozen=True)
class TaskTypeSpec:
    """A task type by a record field (`field`, `map`, `default`) or by whether the record has options."""

    field: str | None = None
    map: Mapping[Scalar, str] = dataclasses.field(default_factory=dict)  # value (as lowercase text) -> task type
    default: str | None = None  # for a value not in `map` (None: the value itself)
    with_options: str | None = None
    without_options: str | None = None

    def __post_init__(self) -> None:
        if self.field is None and (self.with_options is None or self.without_options is None):
            raise ValueError("a task_type mapping needs a 'field', or both 'with_options' and 'without_options'")


@dataclass(frozen=True)
class VarSpec:
    """A look-up table evaluated before the rest of the mapping (MVBench: task file -> video folder)."""

    from_: str = dataclasses.field(metadata={"key": "from"})  # the record field whose value (as text) is looked up
    map: Mapping[str, str]
    default: str | None = None  # for a value not in `map` (None: the record is invalid)


@dataclass(frozen=True)
class RecordMapping:
    """How a release's record maps to a unified record (`hub.to_unified`); each key is documented in hub.py."""

    id: str | None = None
    question: str | None = None
    options: str | OptionsSpec | None = None  # a field name, or where and how
    answer: str | AnswerSpec | None = None
    video: str | None = None
    video_ext: str | None = None
    video_search: bool | None = None
    task_type: str | TaskTypeSpec | None = None
    start: str | None = None
    end: str | None = None
    image: str | None = None
    fields: Mapping[str, str] | None = None  # unified field -> record field or template
    vars: Mapping[str, VarSpec] | None = None
    explode: str | None = None
    filter: Mapping[str, Scalar | tuple[Scalar, ...]] | None = None  # field -> value or values to keep
    exclude: Mapping[str, Scalar | tuple[Scalar, ...]] | None = None  # field -> value or values to drop
    records: str | None = dataclasses.field(default=None, metadata={"choices": ("dict_by_id",)})

    def over(self, base: RecordMapping) -> RecordMapping:
        """`base` with the keys this mapping sets in place of its own (a hub file's overrides of the hub's mapping)."""
        return dataclasses.replace(base, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                            if getattr(self, f.name) is not None})
