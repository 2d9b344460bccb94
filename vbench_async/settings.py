"""Settings dataclasses in and out of JSON, with the checks their declaration carries.

A setting is declared once, as a dataclass field: its type, its default and, in the field's metadata, its `help`
(which makes it a command-line flag, `cli/options.py`) and its bounds (`min`, `max` inclusive, `above` exclusive,
`choices`). The command line and the JSON form (a server job, training validation, a training config's YAML: see
train/config.py and train/flags.py) read the same declaration and check the same bounds, so a value refused by one is
refused by the other; an unknown field is refused with the closest known one as a did-you-mean.

Other metadata keys: `secret` (a credential: never written at rest in clear), `job` False (the evaluation server's
own setting, which a job may not set), `local` (the calling process's own, neither sent in a job nor refused), `key`
(the field's JSON key when it is not the field's name: a Python keyword such as `from`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from .errors import UserError
from .redact import REDACTED, is_secret

T = TypeVar("T")


def bounds_error(f: dataclasses.Field, value: Any) -> str | None:
    """Why `value` breaks field `f`'s declared bounds, or None. None values are not checked (None is "unset")."""
    meta = f.metadata
    if value is None:
        return None
    if "choices" in meta and value not in meta["choices"]:
        return f"must be one of {', '.join(map(str, meta['choices']))}, not {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high, above = meta.get("min"), meta.get("max"), meta.get("above")
        if (isinstance(value, float) and math.isnan(value)) or (low is not None and value < low) or \
                (above is not None and value <= above) or (high is not None and value > high):
            parts = [f"at least {low}" if low is not None else "", f"more than {above}" if above is not None else "",
                     f"at most {high}" if high is not None else ""]
            return f"must be {' and '.join(p for p in parts if p) or 'a number'}, not {value!r}"
    return None


def to_json(obj: Any, hide_secrets: bool = False) -> Any:
    """The JSON form of a settings object (nested dataclasses as objects, paths as strings, tuples as lists).
    `hide_secrets`: a secret field's value (redact.is_secret) is the redaction marker, for what is written down."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {_key(f): REDACTED if hide_secrets and is_secret(f) and getattr(obj, f.name) is not None
                else to_json(getattr(obj, f.name), hide_secrets) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_json(v, hide_secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v, hide_secrets) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def from_json(cls: type[T], data: Any, where: str = "", exclude: typing.Collection[str] = ()) -> T:
    """An instance of `cls` from its JSON form; UserError naming the field for an unknown field (never dropped), a
    field in `exclude` (not settable here), a missing required field, a wrong type or an out-of-bounds value. Fields
    left out keep defaults; a field that is a dataclass (also inside a tuple, a mapping or a union) is read the same
    way, `where` naming its key path."""
    label = f"{where}." if where else ""
    if not isinstance(data, Mapping):
        raise UserError(f"{where or 'settings'} must be a JSON object, not {type(data).__name__}")
    fields = {_key(f): f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise UserError(f"unknown field(s) {', '.join(label + u for u in unknown)}; "
                        f"known: {', '.join(sorted(fields))}{_did_you_mean(unknown, fields, label)}")
    refused = sorted(set(data) & set(exclude))
    if refused:
        raise UserError(f"field(s) {', '.join(label + r for r in refused)} cannot be set here")
    missing = [k for k, f in fields.items() if k not in data and f.init and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise UserError(f"missing required field(s) {', '.join(label + m for m in missing)}")
    hints = _hints(cls)
    values = {fields[k].name: _value(fields[k], hints[fields[k].name], raw, label + k) for k, raw in data.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where or cls.__name__}: {exc}") from None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A class's type hints, resolved once: resolving evaluates each annotation's text (most of a card's read)."""
    return typing.get_type_hints(cls)


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def _did_you_mean(unknown: list[str], known: typing.Iterable[str], label: str) -> str:
    """The message's "; did you mean X?", naming the known field closest to each unknown one (a typo); "" if none."""
    close = [m for u in unknown for m in difflib.get_close_matches(u, list(known), n=1)]
    return f"; did you mean {' or '.join(label + c for c in dict.fromkeys(close))}?" if close else ""


def describe(f: dataclasses.Field, default: Any = dataclasses.MISSING) -> str:
    """A field's help with its declared bounds and `default` (when given), as a command's --help lists it."""
    meta = f.metadata
    limits = [f"one of {', '.join(map(str, meta['choices']))}" if "choices" in meta else "",
              f"at least {meta['min']}" if "min" in meta else "", f"more than {meta['above']}" if "above" in meta
              else "", f"at most {meta['max']}" if "max" in meta else ""]
    text = "; ".join([meta.get("help", ""), *(x for x in limits if x)])
    if default is dataclasses.MISSING or "(default:" in meta.get("help", ""):  # a help that says its own default
        return text
    shown = default if isinstance(default, str) else json.dumps(to_json(default))  # null, true, [0.9, 0.999]
    return f"{text} (default: {shown})"


def leaves(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dataclasses.Field, Any]]:
    """Every scalar setting under `cls`: (path of field names, field, type hint), nested settings opened."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner = _dataclass_of(hints[f.name])
        if inner is not None:
            out += leaves(inner, (*prefix, f.name))
        else:
            out.append(((*prefix, f.name), f, hints[f.name]))
    return out


def _dataclass_of(hint: Any) -> type | None:
    members = [m for m in union_members(hint) if m is not type(None)]
    return members[0] if len(members) == 1 and dataclasses.is_dataclass(members[0]) else None


def union_members(hint: Any) -> tuple[Any, ...]:
    """The types a hint allows: `int | None` -> (int, NoneType); a plain type -> (it,)."""
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def _value(f: dataclasses.Field, hint: Any, raw: Any, name: str) -> Any:
    inner = _dataclass_of(hint)
    members = union_members(hint)
    if inner is not None:  # null: the section's defaults, unless the field may be None
        return None if raw is None and type(None) in members else from_json(inner, {} if raw is None else raw, name)
    if raw is None:
        if type(None) in members or f.default is None:
            return None
        raise UserError(f"{name} may not be null")
    value = _typed(members, raw, name)
    why = bounds_error(f, value)
    if why:
        raise UserError(f"{name} {why}")
    return value


def _typed(members: tuple[Any, ...], raw: Any, name: str) -> Any:
    """`raw` as the first of the field's types it fits (bool is never a number; an int is a float; a mapping is a
    dataclass member's JSON form)."""
    for hint in members:
        origin = typing.get_origin(hint) or hint
        if dataclasses.is_dataclass(origin) and isinstance(origin, type) and isinstance(raw, Mapping):
            return from_json(origin, raw, name)
        if origin is bool and isinstance(raw, bool):
            return raw
        if origin is int and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if origin is float and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if origin in (str, Path) and isinstance(raw, str):
            return origin(raw)
        if origin is Any:
            return raw
        if origin in (dict, Mapping) and isinstance(raw, Mapping):
            key_kind, value_kind = typing.get_args(hint) or (Any, Any)
            return {_typed(union_members(key_kind), k, name): _typed(union_members(value_kind), v, f"{name}.{k}")
                    for k, v in raw.items()}
        if origin is tuple and isinstance(raw, (list, tuple)):
            args = typing.get_args(hint)
            kinds = [args[0]] * len(raw) if len(args) == 2 and args[1] is Ellipsis else list(args)
            if len(kinds) == len(raw):
                return tuple(_typed(union_members(k), x, f"{name}[{i}]") for i, (k, x) in enumerate(zip(kinds, raw)))
    wanted = " or ".join(getattr(typing.get_origin(h) or h, "__name__", str(h)) for h in members
                         if h is not type(None))
    raise UserError(f"{name} must be {wanted}, not {raw!r}")
