"""The reader and writer of a run's declared output records (summary.json, manifest.json: `summary_record.py`,
`manifest_record.py`): one JSON object in, one typed dataclass out, and back.

Why not `settings.from_json`: it refuses unknown keys, which is right for settings a person types (a typo must not
pass silently) and wrong for outputs. A summary written by a newer version, an aggregation's own breakdowns
(`by_<field>`, `mIoU`, `R@0.5`, ...) and the in-memory keys a caller adds (`run_dir`) are keys no declaration lists;
they are kept in `extra` and written back unchanged, and a file read and written again keeps its keys in their order.
A field an older file lacks takes its default. A value of the wrong type (hand-edited, damaged) is refused with one
error, `RecordError`, naming the file and the field: a caller catches that one exception.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .errors import UserError
from .settings import union_members

R = TypeVar("R", bound="OutputRecord")


class RecordError(UserError):
    """A run's output file that cannot be read as its declared record: not JSON, or a field of the wrong type."""


def always(default: Any = None, **kwargs: Any) -> Any:
    """A field a fresh record writes even at its default (a required key; other fields are written once set; a
    record read from a file writes the keys it had)."""
    if "default_factory" not in kwargs:
        kwargs["default"] = default
    return field(metadata={"always": True}, **kwargs)


@dataclass
class OutputRecord:
    """Base of the declared output records. `extra`: the keys no field declares, as read; `keys`: the keys present
    when read, in file order (which fields an older file had, and where to write them back)."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, metadata={"json": False})
    keys: tuple[str, ...] = field(default=(), kw_only=True, compare=False, repr=False, metadata={"json": False})

    @classmethod
    def from_json(cls: type[R], data: Any, where: str = "") -> R:
        """The record of one JSON object; RecordError naming `where` and the field when a value has the wrong type."""
        if not isinstance(data, dict):
            raise RecordError(f"{where or cls.__name__} is a {type(data).__name__}, not a mapping")
        hints = _hints(cls)
        known: dict[str, Any] = {}
        for f in _json_fields(cls):
            if f.name in data:
                known[f.name] = _typed(hints[f.name], data[f.name], f"{where}.{f.name}" if where else f.name)
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**known, extra=extra, keys=tuple(data))

    @classmethod
    def of(cls: type[R], value: R | Mapping[str, Any]) -> R:
        """`value` as this record: a record as it is, a mapping (an in-memory dict the library built) read once."""
        if isinstance(value, cls):
            return value
        return cls.from_json(dict(typing.cast(Mapping[str, Any], value)), cls.__name__)

    def has(self, key: str) -> bool:
        """The key was in the object read (a field present with null differs from one an older file lacks)."""
        return key in self.keys

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys read, in their order, then the fields set since (declared order), then `extra`."""
        values = {f.name: getattr(self, f.name) for f in _json_fields(type(self))}
        written = {f.name for f in _json_fields(type(self))
                   if f.name in self.keys or (f.metadata.get("always") and not self.keys)
                   or values[f.name] != _default(f)}
        out: dict[str, Any] = {}
        for key in self.keys:
            if key in written:
                out[key] = _plain(values[key])
            elif key in self.extra:
                out[key] = self.extra[key]
        for name in values:
            if name in written and name not in out:
                out[name] = _plain(values[name])
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out


def read_record(cls: type[R], path: Path) -> R:
    """The record of a JSON file; RecordError when it cannot be read, is not JSON or has the wrong shape
    (FileNotFoundError passes through: whether a missing file is an error is the caller's to say)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path} cannot be read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise RecordError(f"{path} is nested too deeply to be a vbench-async file") from None
    return cls.from_json(data, str(path))


# ------------------------------------------------------------------------------------- plain records' field shapes
# A record kept as a plain dataclass (a result line: `sample_result.Result`, read 100,000 times per summary, where
# an `OutputRecord`'s recursive check would cost seconds) is checked field by field against the same declaration:
# each field's value against the types its hint names, one level deep.


@dataclass(frozen=True)
class FieldKind:
    """What one field accepts at its top level, read off its type hint (a float field takes an int: JSON has one
    number type; a list field takes a tuple: an in-memory record)."""

    types: tuple[type, ...]
    nullable: bool


@functools.cache
def field_kinds(cls: type) -> dict[str, FieldKind]:
    """Each JSON field of `cls` (metadata `json` False: not written) with what it accepts."""
    out = {}
    for f in _json_fields(cls):
        members = union_members(_hints(cls)[f.name])
        bases = [typing.get_origin(m) or m for m in members]
        accepted = tuple(b for b in bases if b is not type(None) and isinstance(b, type) and b is not Any)
        if float in accepted:
            accepted += (int,)
        if list in accepted:
            accepted += (tuple,)
        out[f.name] = FieldKind(accepted, type(None) in bases)
    return out


def type_problem(cls: type, data: Mapping[str, Any]) -> str | None:
    """The first field of `data` whose value is not of the type `cls` declares for it (absent or null pass)."""
    for name, kind in field_kinds(cls).items():
        v = data.get(name)
        if v is None or not kind.types:
            continue
        if (isinstance(v, bool) and bool not in kind.types) or not isinstance(v, kind.types):
            return f"{name} is a {type(v).__name__}"
    return None


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def json_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of `cls`'s JSON form, one level deep, read off its fields (so the two cannot drift apart)."""
    properties: dict[str, Any] = {}
    fields = _json_fields(cls)
    for f in fields:
        bases = [typing.get_origin(m) or m for m in union_members(_hints(cls)[f.name])]
        kinds = ["null" if b is type(None) else _JSON_TYPES[b] for b in bases if b is type(None) or b in _JSON_TYPES]
        properties[f.name] = {"type": kinds if len(kinds) > 1 else kinds[0]} if kinds else {}
    required = [f.name for f in fields if _default(f) is dataclasses.MISSING]
    return {"type": "object", "properties": properties, "required": required}


# ------------------------------------------------------------------------------------------------- the type checks
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A class's resolved type hints, once per class (resolving evaluates every annotation's text)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _json_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("json", True)]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _typed(hint: Any, raw: Any, name: str) -> Any:
    """`raw` checked against `hint` (numbers are never converted: a file read and written back stays the same)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        problems = []
        for member in args:
            if member is type(None):
                continue
            try:
                return _typed(member, raw, name)
            except RecordError as exc:
                problems.append(str(exc))
        raise RecordError(problems[0] if len(problems) == 1 else f"{name}: {_shown(raw)} is none of "
                          f"{', '.join(_name(m) for m in args)}")
    if isinstance(hint, type) and issubclass(hint, OutputRecord):
        return hint.from_json(raw, name)
    if origin is dict:
        if not isinstance(raw, dict):
            raise RecordError(f"{name}: {_shown(raw)} is not a mapping")
        return {k: _typed(args[1], v, f"{name}.{k}") for k, v in raw.items()}
    if origin is list:
        if not isinstance(raw, list):
            raise RecordError(f"{name}: {_shown(raw)} is not a list")
        return [_typed(args[0], v, f"{name}[{i}]") for i, v in enumerate(raw)]
    if hint is float:
        ok = isinstance(raw, (int, float)) and not isinstance(raw, bool)
    elif hint is int:
        ok = isinstance(raw, int) and not isinstance(raw, bool)
    else:
        ok = isinstance(raw, hint)
    if not ok:
        raise RecordError(f"{name}: {_shown(raw)} is not a {_name(hint)}")
    return raw


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def _shown(raw: Any) -> str:
    text = repr(raw)
    return f"{type(raw).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _plain(value: Any) -> Any:
    if isinstance(value, OutputRecord):
        return value.to_json()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
