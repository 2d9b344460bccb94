"""How options read and are checked: the help formatter every command uses, and bounded numbers."""

from __future__ import annotations

import argparse
from typing import Any, Callable


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help, unless the help already says what the default is or there is
    nothing to say (None, a switch that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or \
                not action.option_strings:
            return text
        return text + " (default: %(default)s)"

def bounded(kind: type, min: float | None = None, max: float | None = None,
            above: float | None = None) -> Callable[[str], Any]:
    """An argparse `type` that parses `kind` and rejects values out of bounds, naming the bound."""
    def parse(text: str) -> Any:
        value = kind(text)  # a ValueError: argparse says "invalid int value"
        if (min is not None and value < min) or (above is not None and value <= above) or \
                (max is not None and value > max):
            parts = [f"at least {min}" if min is not None else "", f"more than {above}" if above is not None else "",
                     f"at most {max}" if max is not None else ""]
            raise argparse.ArgumentTypeError(f"must be {' and '.join(p for p in parts if p)}, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse
