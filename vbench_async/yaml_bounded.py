"""YAML a user wrote (a card, a suite, a data map, a training config) read with bounded work.

`yaml.safe_load` constructs no objects, but it expands aliases (nine levels of `&a [*a, *a, ...]` under a card's
`aggregation:` grew a run to 3.3 GB) and recurses once per nesting level (a card nested 50,000 deep raised
RecursionError). `load` is `safe_load` that refuses aliases and any nesting deeper than `MAX_DEPTH`, with a
`yaml.YAMLError` that says what and where (line and column, never the file's text), so each caller's "FILE: not
valid YAML: ..." message names the file.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError

MAX_DEPTH = 64  # levels of lists and mappings; the deepest shipped card uses 5


class BoundedSafeLoader(yaml.SafeLoader):
    """SafeLoader without aliases and with at most MAX_DEPTH levels of nesting."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, f"aliases are not allowed (*{event.anchor}): write the value out",
                                event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class YAMLProblem(yaml.YAMLError):
    """A YAML error that says what and where (line, column), never quoting the file's text: a message may travel
    (a server job's error goes back over HTTP) to someone who may not read the file."""


def load(text: str) -> Any:
    """The YAML document in `text`, as `yaml.safe_load` gives it; YAMLProblem (a yaml.YAMLError) for invalid YAML,
    an alias or deep nesting."""
    try:
        return yaml.load(text, Loader=BoundedSafeLoader)
    except yaml.MarkedYAMLError as exc:
        parts = [f"{what} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else what
                 for what, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark)) if what]
        raise YAMLProblem("; ".join(parts) or type(exc).__name__) from None
