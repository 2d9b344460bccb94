"""Option groups generated from settings dataclasses (as TRL does): each setting is declared once, with its type,
default and help, and every command that takes it gets the same flag.

A field whose metadata has a `help` is a flag `--field-name` (metadata `flag` renames it). A bool defaulting to False
is a switch that sets it; one defaulting to True is cleared by its switch (name it `--no-...`). A `comma_list` field
takes "a,b,c". A number's bounds, checked when the command line is parsed (before any engine starts): `min` and
`max` (inclusive), `above` (exclusive).

    add_group(parser, VLLMSettings, "vLLM engine")          # the flags
    engine = from_args(VLLMSettings, args)                  # the settings the user gave, defaults elsewhere

The groups every command shares: selection (`Selection`), prompts (`PromptSettings`), frames (`FrameOverrides`),
sampling (`SamplingParams`), engine (`VLLMSettings`) and server (`ServerSettings`): `GROUPS` has each one's title.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Collection, TypeVar

from ..backends.base import SamplingParams
from ..backends.openai import ServerSettings
from ..backends.vllm import VLLMSettings
from ..benchmarks.prompts import PromptSettings
from ..benchmarks.selection import Selection
from ..frames.overrides import FrameOverrides
from ..redact import mark_secret
from .formatting import bounded

T = TypeVar("T")

GROUPS: dict[type, str] = {
    Selection: "what to evaluate",
    PromptSettings: "prompts (part of the result config)",
    FrameOverrides: "frames (override the benchmark's preset; part of the result config)",
    SamplingParams: "sampling (greedy by default)",
    VLLMSettings: "vLLM engine (backend vllm)",
    ServerSettings: "server (backend openai)",
}
_SCALARS = (int, float, str, Path)


def flag_fields(cls: type, exclude: Collection[str] = ()) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata and f.name not in exclude]


def add_group(parser: argparse.ArgumentParser, cls: type, title: str | None = None,
              exclude: Collection[str] = ()) -> argparse._ArgumentGroup:
    """Add one flag per settable field of `cls` (but those in `exclude`) to a new group of `parser`."""
    group = parser.add_argument_group(title or GROUPS[cls])
    hints = typing.get_type_hints(cls)
    for f in flag_fields(cls, exclude):
        kind = _scalar(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        if f.metadata.get("secret"):  # its value is redacted from the command line every artefact records
            mark_secret(f.name)
        kwargs: dict[str, Any] = {"dest": _dest(f, default), "help": f.metadata["help"]}
        if kind is bool:  # a switch: it sets the field when off by default, clears it when on
            kwargs.update(action="store_true", default=False)
        elif f.metadata.get("comma_list"):
            kwargs.update(type=_comma_list, default=default)
        else:
            bounds = {k: f.metadata[k] for k in ("min", "max", "above") if k in f.metadata}
            kwargs.update(type=bounded(kind, **bounds) if bounds else kind, default=default)
            if "choices" in f.metadata:
                kwargs["choices"] = f.metadata["choices"]
        group.add_argument(flag, **kwargs)
    return group


def from_args(cls: type[T], args: argparse.Namespace, exclude: Collection[str] = (), **values: Any) -> T:
    """An instance of `cls` with the flags `add_group` added (and `values`); other fields keep their defaults."""
    given = {}
    for f in flag_fields(cls, exclude):
        if f.name not in values:
            value = getattr(args, _dest(f, f.default))
            given[f.name] = (not value) if _dest(f, f.default) != f.name else value
    return cls(**given, **values)


def _dest(f: dataclasses.Field, default: Any) -> str:
    """Where argparse keeps a field's flag: `no_<name>` for a switch that turns a True setting off."""
    return f"no_{f.name}" if default is True else f.name


def _scalar(hint: Any) -> type:
    """The one non-None type of a field: `int | None` -> int, `tuple[str, ...] | None` -> tuple."""
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = [typing.get_origin(m) or m for m in members if m is not type(None)]
    if len(kinds) != 1 or not (kinds[0] in _SCALARS or kinds[0] in (bool, tuple)):
        raise TypeError(f"no command-line form for a field of type {hint}")
    return kinds[0]


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())
