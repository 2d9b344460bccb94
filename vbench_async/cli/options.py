"""Option groups generated from settings dataclasses (as TRL does): each setting is declared once, with its type,
default and help, and every command that takes it gets the same flag.

A field whose metadata has a `help` is a flag `--field-name` (metadata `flag` renames it; `aliases` are more
spellings of it, hidden from --help: another tool's name, or a name kept for old scripts). A bool defaulting to False
is a switch that sets it; one defaulting to True is cleared by its switch (name it `--no-...`). A `comma_list` field
takes "a,b,c". A number's bounds, checked when the command line is parsed (before any engine starts): `min` and
`max` (inclusive), `above` (exclusive).

    add_group(parser, VLLMSettings, "vLLM engine")          # the flags
    engine = from_args(VLLMSettings, args)                  # the settings the user gave, defaults elsewhere

The groups every command shares: selection (`Selection`), prompts (`PromptSettings`), frames (`FrameSettings`),
sampling (`SamplingOverrides`), engine (`VLLMSettings`) and server (`ServerSettings`): `GROUPS` has each one's title.
A flag whose field defaults to None is unset unless given, so a given value is told from no flag even when it
equals the value the run would otherwise use (an evaluation recipe fills only what is unset).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path
from typing import Any, Callable, Collection, TypeVar

from ..backends.openai import ServerSettings
from ..backends.sampling_overrides import SamplingOverrides
from ..backends.vllm import VLLMSettings
from ..benchmarks.prompts import PromptSettings
from ..benchmarks.selection import Selection
from ..frames.frame_settings import FrameSettings
from ..redact import mark_secret
from ..settings import bounds_error, union_members

T = TypeVar("T")

GROUPS: dict[type, str] = {
    Selection: "what to evaluate",
    PromptSettings: "prompts (part of the result config)",
    FrameSettings: "frames (override the benchmark's preset; part of the result config)",
    SamplingOverrides: "sampling (greedy by default)",
    VLLMSettings: "vLLM engine (backend vllm)",
    ServerSettings: "server (backend openai)",
}
_SCALARS = (int, float, str, Path)


def flag_fields(cls: type, exclude: Collection[str] = (), only: Collection[str] | None = None
                ) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls)
            if "help" in f.metadata and f.name not in exclude and (only is None or f.name in only)]


def add_group(parser: argparse.ArgumentParser, cls: type, title: str | None = None,
              exclude: Collection[str] = (), only: Collection[str] | None = None) -> argparse._ArgumentGroup:
    """Add one flag per settable field of `cls` (but those in `exclude`; only those in `only` when given) to a new
    group of `parser`."""
    group = parser.add_argument_group(title or GROUPS[cls])
    add_fields(group, cls, exclude, only)
    return group


def add_fields(group: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, exclude: Collection[str] = (),
               only: Collection[str] | None = None) -> None:
    """The flags of `cls`'s settable fields (as `add_group`), added to an existing group."""
    hints = typing.get_type_hints(cls)
    for f in flag_fields(cls, exclude, only):
        kind = _scalar(hints[f.name])
        default = _default(f)
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        if f.metadata.get("secret"):  # its value is redacted from the command line every artefact records
            mark_secret(f.name)
        kwargs: dict[str, Any] = {"dest": _dest(f, default), "help": f.metadata["help"]}
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        if kind is bool:  # a switch: it sets the field when off by default, clears it when on
            kwargs.update(action="store_true", default=False)
        elif f.metadata.get("comma_list"):
            kwargs.update(type=_comma_list, default=default)
        else:
            kwargs.update(type=_checked(kind, f), default=None if default is dataclasses.MISSING else default)
            if "choices" in f.metadata:
                kwargs["choices"] = f.metadata["choices"]
            else:
                kwargs["metavar"] = f.metadata.get("metavar", flag.lstrip("-").replace("-", "_").upper())
        for alias in f.metadata.get("aliases", ()):  # the same destination, not listed in --help
            group.add_argument(alias, **{**kwargs, "help": argparse.SUPPRESS})
        group.add_argument(flag, **kwargs)  # last: the flag's own action is the one a parser lists for the field


def add_shard_option(group: argparse.ArgumentParser | argparse._ArgumentGroup, does: str) -> None:
    """`--shard K/N|auto` (`launcher.resolve_shard` reads it), one declaration for `run` and `preprocess`, which split
    a workload the same way; `does`: what the command does with its shard."""
    group.add_argument("--shard", metavar="K/N",
                       help=f"{does}. K counts from 0; 'auto' reads it from the launcher: VBENCH_ASYNC_SHARD, "
                            "torchrun's RANK/WORLD_SIZE, a Slurm array's SLURM_ARRAY_TASK_ID/COUNT, or srun's "
                            "SLURM_PROCID/SLURM_NTASKS")


def values_from_args(cls: type, args: argparse.Namespace, exclude: Collection[str] = (),
                     only: Collection[str] | None = None) -> dict[str, Any]:
    """The values of the flags `add_group`/`add_fields` added for `cls`, by field name."""
    given = {}
    for f in flag_fields(cls, exclude, only):
        dest = _dest(f, _default(f))
        value = getattr(args, dest)
        given[f.name] = (not value) if dest != f.name else value
    return given


def from_args(cls: type[T], args: argparse.Namespace, exclude: Collection[str] = (), **values: Any) -> T:
    """An instance of `cls` with the flags `add_group` added (and `values`); other fields keep their defaults."""
    given = values_from_args(cls, args, (*exclude, *values))
    return cls(**given, **values)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


def _checked(kind: type, f: dataclasses.Field) -> Callable[[str], Any]:
    """An argparse `type` that parses `kind` and refuses what the field's declared bounds refuse (settings.py: the
    same check the JSON form makes)."""
    def parse(text: str) -> Any:
        value = kind(text)  # a ValueError: argparse says "invalid int value"
        why = bounds_error(f, value) if "choices" not in f.metadata else None  # argparse names the choices itself
        if why:
            raise argparse.ArgumentTypeError(why)
        return value

    parse.__name__ = kind.__name__
    return parse


def _dest(f: dataclasses.Field, default: Any) -> str:
    """Where argparse keeps a field's flag: `no_<name>` for a switch that turns a True setting off."""
    return f"no_{f.name}" if default is True else f.name


def _scalar(hint: Any) -> type:
    """The one non-None type of a field: `int | None` -> int, `tuple[str, ...] | None` -> tuple."""
    members = union_members(hint)
    kinds = [typing.get_origin(m) or m for m in members if m is not type(None)]
    if len(kinds) != 1 or not (kinds[0] in _SCALARS or kinds[0] in (bool, tuple)):
        raise TypeError(f"no command-line form for a field of type {hint}")
    return kinds[0]


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())
