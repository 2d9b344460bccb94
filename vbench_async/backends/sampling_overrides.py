"""The sampling fields a run's user set: `SamplingOverrides`, a partial `SamplingParams` (None: not set).

A field counts as set when the user gave it (a flag on the command line, a key of a server job's or a training
validation run's `sampling`), whatever its value: `--temperature 0` is set even though 0 is the default. An
evaluation recipe fills only the fields left unset (benchmarks/recipes.py), the defaults the rest. The fields,
their help and bounds are SamplingParams': each one is declared there, this record only makes it optional.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .base import SamplingParams

_PARAMS = {f.name: f for f in dataclasses.fields(SamplingParams)}


def _unset(name: str) -> Any:
    """SamplingParams' field `name`, unset by default; its flag's help says the value it then takes."""
    declared = _PARAMS[name]
    text = f"{declared.metadata['help']} (default: {declared.default}, or the --recipe's value when it sets one)"
    return field(default=None, metadata={**declared.metadata, "help": text})


@dataclass(frozen=True)
class SamplingOverrides:
    """The user's sampling: each field as SamplingParams has it, None where the user set nothing."""

    temperature: float | None = _unset("temperature")
    top_p: float | None = _unset("top_p")
    top_k: int | None = _unset("top_k")
    max_tokens: int | None = _unset("max_tokens")
    seed: int | None = _unset("seed")
    repetition_penalty: float | None = _unset("repetition_penalty")
    presence_penalty: float | None = _unset("presence_penalty")

    @classmethod
    def every(cls, params: SamplingParams) -> SamplingOverrides:
        """Every field set, to `params`' values (code that means all of them, whatever a recipe says)."""
        return cls(**params.to_dict())

    def given(self) -> dict[str, Any]:
        """The set fields, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def over(self, base: SamplingParams) -> SamplingParams:
        """`base` with the set fields in place of its own."""
        return dataclasses.replace(base, **self.given())


# One field here for each of SamplingParams': a sampling field added there without its line here fails at import,
# not as a flag that is silently missing.
if {f.name for f in dataclasses.fields(SamplingOverrides)} != set(_PARAMS):
    raise TypeError("SamplingOverrides must declare exactly SamplingParams' fields")
