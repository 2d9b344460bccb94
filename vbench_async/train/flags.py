"""The training config's command line, generated from `TrainConfig` as TRL's HfArgumentParser is from GRPOConfig.

Every setting is a flag spelled as its YAML key, `--rollout.n 4`, listed by --help with its help, bounds and
default (the field's declaration: train/config.py). A flag is a `--set rollout.n=4`: both append `KEY=VALUE` to one
ordered list (`args.overrides`, the value read as YAML), which `load_config` applies over the YAML file, so flags and
`--set` check alike (unknown keys with a did-you-mean, bounds, choices) and the later one wins.

    add_set_option(parser)       # --set KEY=VALUE (light: reads no config)
    add_config_flags(parser)     # one flag per TrainConfig setting, grouped by section
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

from .. import settings

DEST = "overrides"  # where --set and every flag put their KEY=VALUE items, in command-line order


def add_set_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest=DEST, action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set rollout.n=4 --set train.lr=1e-5 (repeatable, none "
                             "by default; the value is YAML); every key is also a flag of its own, listed below")


class _Override(argparse.Action):
    """Appends `KEY=VALUE` to the overrides, as `--set KEY=VALUE` does."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        key = self.option_strings[0].removeprefix("--")
        setattr(namespace, DEST, [*(getattr(namespace, DEST, None) or []), f"{key}={values}"])


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig setting, in one argument group per config section."""
    from .config import TrainConfig

    sections = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(TrainConfig)}
    groups: dict[str, argparse._ArgumentGroup] = {}
    for path, f, hint in settings.leaves(TrainConfig):
        top = path[0] if len(path) > 1 else ""
        if top not in groups:
            groups[top] = parser.add_argument_group(f"config: {top} ({sections[top]})" if top else "config",
                                                    None if top else GUIDE)
        _add_flag(groups[top], path, f, hint)


GUIDE = ("Every setting of the YAML config is a flag: --SECTION.KEY VALUE is --set SECTION.KEY=VALUE (the value is "
         "YAML: null, true, [0.9, 0.99], {max_frames: 8}); flags and --set apply in order over the file.")
USAGE = "%(prog)s --config CONFIG [--set KEY=VALUE] [--SECTION.KEY VALUE] ..."  # the flags are too many to list


def _add_flag(group: argparse._ArgumentGroup, path: tuple[str, ...], f: dataclasses.Field, hint: Any) -> None:
    text = settings.describe(f, _default(f)).replace("%", "%%")  # argparse %-formats help
    switch = _members(hint) == [bool]  # `--train.gradient_checkpointing` alone: true
    group.add_argument("--" + ".".join(path), dest=DEST, action=_Override, default=argparse.SUPPRESS, help=text,
                       metavar=_metavar(hint), nargs="?" if switch else None, const="true" if switch else None)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _members(hint: Any) -> list[Any]:
    """The field's types but None: `int | None` -> [int]."""
    members = settings.union_members(hint)
    return [typing.get_origin(m) or m for m in members if m is not type(None)]


def _metavar(hint: Any) -> str:
    """INT, STR, ... (the help lists the choices and bounds); YAML for a list, a mapping or several types."""
    kinds = _members(hint)
    names = [k.__name__.upper() for k in kinds if k in (bool, int, float, str)]
    return "|".join(names) if len(names) == len(kinds) else "YAML"
