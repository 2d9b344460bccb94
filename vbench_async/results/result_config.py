"""A benchmark's result config as a declared record: what can change an answer, so what its config hash covers and
its result file is named after. The runner builds it (`evaluation/runner.py`), the manifest and a shard index record
it, and the leaderboard, `compare`, `merge` and re-scoring read it back (`ResultConfig.from_json`).

The record writes exactly the keys the runner always wrote, so config hashes, and with them every earlier result
file, stay what they were: `ablation` and `recipe` appear only when set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..record_io import OutputRecord, always


@dataclass
class RecipeIdentity(OutputRecord):
    """The run's evaluation recipe (`benchmarks/recipes.py` `Recipe.identity`): what its config hashes cover too."""

    name: str | None = None
    version: int | None = None

    @property
    def label(self) -> str:
        """How the leaderboard names it: "qwen3-vl v1"."""
        return f"{self.name or '?'} v{self.version}" if self.version is not None else self.name or "?"


@dataclass
class RecordedFrames(OutputRecord):
    """The frame spec a benchmark ran with (`FrameSpec.to_dict()`), as recorded: pixel fields filled in."""

    family: str | None = None
    fps: float | None = None
    max_frames: int | None = None
    nframes: int | None = None  # an exact count: it overrides fps and max_frames
    min_frames: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    total_pixels: int | None = None
    image_min_pixels: int | None = None
    image_max_pixels: int | None = None
    side: int | None = None  # fixed-size families' square side
    second_resize_max_pixels: int | None = None


@dataclass
class RecordedSampling(OutputRecord):
    """The sampling a benchmark ran with (`SamplingParams.to_dict()`)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    seed: int | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None


@dataclass
class ResultConfig(OutputRecord):
    """What can change an answer: the weights (a content hash, or the hub revision), the serving path (in-process vLLM,
    a server, transformers), the decoder that produced the frames, frames, prompt and sampling."""

    model: str | None = always()
    backend: str | None = always()
    decoder: str | None = always()
    benchmark: str | None = always()
    frames: RecordedFrames = always(default_factory=RecordedFrames)
    prompt: str | None = always()  # the prompt templates' hash
    thinking: bool | None = always()
    sampling: RecordedSampling = always(default_factory=RecordedSampling)
    ablation: str | None = None  # written only when set: a real run's config hash stays what it was
    recipe: RecipeIdentity | None = None  # likewise: two recipes never share a result file, none keeps the old hashes


def flat(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` one level deep, nested settings under dotted names (`frames.max_frames`)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            out.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            out[key] = value
    return out


def differing(settings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The dotted names (`flat`) whose values are not the same in all of `settings`, in first-seen order (an absent
    setting reads as null: an older file that lacks a setting did not set it)."""
    flats = [flat(s) for s in settings]
    names = dict.fromkeys(n for f in flats for n in f)
    return [n for n in names if len({shown(f[n] if n in f else None) for f in flats}) > 1]


def shown(value: Any) -> str:
    """A setting's value as JSON text: how settings are compared and shown."""
    return json.dumps(value, sort_keys=True, default=str)


