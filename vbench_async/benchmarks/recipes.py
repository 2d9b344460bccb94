"""Evaluation recipes: a model maker's published protocol as one named, versioned bundle (issue 39).

A recipe fixes what moves a score besides the model: the prompt variant per benchmark (`prompts.py`), the system
prompt (every request's first turn, `Request.system`, sent by every backend and counted by `plan`), the frame
settings (`FrameSettings`, the processor's second resize included), the sampling and, where the maker publishes its
own, the answer extraction (the official protocol, in place of the card's; re-scoring a run uses the recipe its
benchmark config records). It sits between the benchmark card and the user's flags: card < recipe < explicit
flags. A field the recipe leaves unset keeps the card's (or the project's default) value. A flag wins when it is
given, whatever its value: the frame flags, the sampling flags and `--prompt-variant` are unset by default (None), so
`--temperature 0` under a sampling recipe is greedy (the recipe's other sampling fields stay) and
`--prompt-variant official` under a prompt recipe is official. The run configuration
carries what the user set as data (`RunConfig.sampling`, a `SamplingOverrides`; `PromptSettings.prompt_variant`): on
the command line the flags given, in a server job's or a training validation run's JSON the keys present (null:
unset). `run_config.run_sampling` and `use_recipe` fill in the rest: the recipe's value, else the default.

The recipe's name and version enter every result file's config hash and the manifest, so two recipes never share a
result file; changing what a recipe sets means bumping its version. The facts and their sources: docs/recipes.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..backends.base import SamplingParams
from ..backends.sampling_overrides import SamplingOverrides
from ..errors import UserError
from ..frames.frame_settings import FrameSettings
from .prompts import check_variant

_SAMPLING_FIELDS = frozenset(f.name for f in dataclasses.fields(SamplingParams))
_SAMPLING_DEFAULTS = SamplingParams()


@dataclass(frozen=True)
class RecipePart:
    """What a recipe sets for one benchmark, or for all of them (None / empty: the layer below holds)."""

    prompt_variant: str | None = None
    frames: FrameSettings = field(default_factory=FrameSettings)
    sampling: Mapping[str, Any] = field(default_factory=dict)  # SamplingParams fields
    # The maker's answer extraction (`scoring.official.PROTOCOLS`): the official reading in place of the card's.
    official_protocol: str | None = None

    def __post_init__(self) -> None:
        if self.prompt_variant is not None:
            check_variant(self.prompt_variant)
        if self.official_protocol is not None:
            from ..scoring.official import get_protocol

            get_protocol(self.official_protocol)  # an unknown name fails here, not at the first score
        unknown = sorted(set(self.sampling) - _SAMPLING_FIELDS)
        if unknown:
            raise ValueError(f"unknown sampling field(s) {', '.join(unknown)}")
        dataclasses.replace(_SAMPLING_DEFAULTS, **self.sampling)  # a wrong type fails here, not mid-run

    def over(self, base: RecipePart) -> RecipePart:
        """`base` with this part's set values in place of its own."""
        return RecipePart(self.prompt_variant or base.prompt_variant, self.frames.over(base.frames),
                          {**base.sampling, **self.sampling}, self.official_protocol or base.official_protocol)


@dataclass(frozen=True)
class Recipe:
    """One protocol: `common` applies to every benchmark, `benchmarks` (by card id) over it. The sampling of
    `common` is the run's (its seed seeds the engine); a benchmark's part may add sampling fields (a task's own
    max tokens) but not set again one that `common` sets: each field then has one source per run."""

    name: str
    version: int
    summary: str  # one line, for --help and `list --recipes`
    source: str  # what it follows (docs/recipes.md has the detail)
    # The maker's system message: every request of the run sends it (`Request.system`); the version covers it.
    system_prompt: str | None = None
    common: RecipePart = field(default_factory=RecipePart)
    benchmarks: Mapping[str, RecipePart] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for bench, part in self.benchmarks.items():
            both = sorted(set(part.sampling) & set(self.common.sampling))
            if both:
                raise ValueError(f"recipe {self.name}: {bench} sets again the run-wide sampling field(s) {both}")

    @property
    def identity(self) -> dict[str, Any]:
        """What the config hash and the manifest record: {name, version}."""
        return {"name": self.name, "version": self.version}

    def part(self, benchmark: str) -> RecipePart:
        """The settings for `benchmark` (a card id; a preset "<id>@<preset>" uses its card's)."""
        own = self.benchmarks.get(benchmark) or self.benchmarks.get(benchmark.partition("@")[0])
        return own.over(self.common) if own is not None else self.common

    def prompt_variant(self, benchmark: str, given: str | None) -> str:
        """The prompt variant `benchmark` renders with: the user's when set (None: not set), else the recipe's, else
        the default."""
        from .prompts import DEFAULT_VARIANT

        return given or self.part(benchmark).prompt_variant or DEFAULT_VARIANT

    def frames(self, benchmark: str, card: FrameSettings) -> FrameSettings:
        """The card's frame settings with the recipe's set values over them (the user's flags come later)."""
        return self.part(benchmark).frames.over(card)

    def protocol(self, benchmark: str) -> str | None:
        """The official protocol the recipe reads `benchmark`'s answers with (None: the card's)."""
        return self.part(benchmark).official_protocol

    def sampling(self, given: SamplingOverrides, benchmark: str | None = None) -> SamplingParams:
        """The user's set fields (`given`) over the recipe's sampling over the defaults: the run's (`common`) or,
        with `benchmark`, that benchmark's requests'."""
        part = self.part(benchmark) if benchmark is not None else self.common
        return given.over(dataclasses.replace(_SAMPLING_DEFAULTS, **part.sampling))


# -- the recipes -------------------------------------------------------------------------------------------------

_QWEN3_VL_VIDEOMME_FRAMES = FrameSettings(  # evaluation/VideoMME/infer_instruct.sh as shipped (min_pixels 3584)
    fps=2.0, min_frames=4, max_frames=512, min_pixels=3584, max_pixels=401408, total_pixels=19267584)
QWEN3_VL_8B_SECOND_RESIZE = 25165824  # Qwen3-VL-8B's video processor size.longest_edge (frames x height x width)
# VLMEvalKit's Qwen3-VL configs set no pixels and, on the dataset 'Video-MME' (no _1fps / _64frame suffix), neither fps
# nor nframes reach the video entry: qwen-vl-utils' own defaults (fps 2, 4-768 frames, 128-768 tokens of 32x32 px a
# frame, 90 % of 128000 such tokens a video)
_VLMEVALKIT_QWEN3_VL_FRAMES = FrameSettings(
    fps=2.0, min_frames=4, max_frames=768, min_pixels=131072, max_pixels=786432, total_pixels=117964800,
    second_resize_max_pixels=QWEN3_VL_8B_SECOND_RESIZE)
_LMMS_EVAL_TASK_MAX_TOKENS = {  # each task YAML's generation_kwargs.max_new_tokens (greedy)
    "videomme": 16, "mvbench": 16, "mlvu": 16, "vsibench": 16, "lvbench": 16, "longvideobench": 32, "videommmu": 1024}

RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe(
        name="easyvideor1", version=1,
        summary="the predecessor's protocol: the cards' frames (EasyVideoR1's scripts, no second resize), its "
                "prompts (prompt variant predecessor), greedy",
        source="EasyVideoR1 (shared/docs/predecessor-eval.md); docs/recipes.md section 4",
        common=RecipePart(prompt_variant="predecessor")),
    Recipe(
        name="qwen3-vl", version=2,  # 2: Video-MME's answers read by the script's rule (videomme_qwen3vl)
        summary="the Qwen3-VL repository's Video-MME script: its prompt ('The best answer is:'), fps 2, 4-512 "
                "frames, 3584-401408 px a frame, 19267584 a video, the processor's second resize (<= 25165824), "
                "sampling T 0.7, top-p 0.8, top-k 20, presence 1.5, 32768 tokens, seed 3407; its answer rule "
                "(after the last </think>, can_infer; the judge where it reads nothing)",
        source="QwenLM/Qwen3-VL@96588727 evaluation/VideoMME (infer_instruct.sh, run_videomme.py, dataset_utils.py, "
               "eval_utils.py); other benchmarks: the cards' frames, official prompts and protocols with the same "
               "sampling and second resize",
        common=RecipePart(
            prompt_variant="qwen3-vl",
            frames=FrameSettings(second_resize_max_pixels=QWEN3_VL_8B_SECOND_RESIZE),
            sampling={"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5,
                      "repetition_penalty": 1.0, "max_tokens": 32768, "seed": 3407}),
        benchmarks={"videomme": RecipePart(frames=_QWEN3_VL_VIDEOMME_FRAMES, official_protocol="videomme_qwen3vl")}),
    Recipe(
        name="lmms-eval", version=2,  # 2: Video-Holmes in its qwen3_vl format too
        summary="lmms-eval --model qwen3_vl: exactly 32 frames, 200704-1605632 px a frame (no second resize), "
                "Video-MME and Video-Holmes in its qwen3_vl format, other benchmarks "
                "the official prompts, greedy with each task's max tokens",
        source="EvolvingLMMs-Lab/lmms-eval@75571cf lmms_eval/models/simple/qwen3_vl.py, tasks/*/ YAMLs and utils.py",
        system_prompt="You are a helpful assistant.",
        common=RecipePart(
            prompt_variant="lmms-eval-qwen3-vl",
            # total_pixels: the class passes none, so qwen-vl-utils' default (90 % of 128000 tokens of 32x32 px)
            frames=FrameSettings(nframes=32, min_pixels=200704, max_pixels=1605632, total_pixels=117964800),
            sampling={"temperature": 0.0}),
        benchmarks={b: RecipePart(sampling={"max_tokens": n}) for b, n in _LMMS_EVAL_TASK_MAX_TOKENS.items()}),
    Recipe(
        name="vlmevalkit", version=1,
        summary="VLMEvalKit's Qwen3-VL-8B-Instruct config (vLLM) on its 'Video-MME' dataset: its Video-MME prompt "
                "('These are the frames of a video. ...', 'Answer: '), other benchmarks the official prompts; "
                "qwen-vl-utils' defaults (fps 2, 4-768 frames, 131072-786432 px a frame, 117964800 a video) and the "
                "processor's second resize (<= 25165824); sampling T 0.7, top-p 0.8, top-k 20, presence 1.5, 16384 "
                "tokens, seed 0",
        source="open-compass/VLMEvalKit@e8e78f0 vlmeval/config.py (Qwen3-VL-8B-Instruct), vlmeval/vlm/qwen3_vl/"
               "model.py, vlmeval/inference_video.py, vlmeval/dataset/videomme.py; other benchmarks: the official "
               "prompts with the same frames and sampling",
        common=RecipePart(
            prompt_variant="vlmevalkit",
            frames=_VLMEVALKIT_QWEN3_VL_FRAMES,
            sampling={"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5,
                      "repetition_penalty": 1.0, "max_tokens": 16384, "seed": 0})),
)}


def get(name: str) -> Recipe:
    """A recipe by name (UserError naming the known ones otherwise)."""
    try:
        return RECIPES[name]
    except KeyError:
        raise UserError(f"unknown recipe {name!r}; choose from {', '.join(RECIPES)}") from None


def recipe_help() -> str:
    """The --recipe flag's text: one clause per recipe."""
    return ("evaluation recipe, a model maker's published protocol (prompt, frames, second resize, sampling, answer "
            "extraction) over the cards; explicit flags still win (card < recipe < flags); recorded in the manifest "
            "and the config hash: "
            + "; ".join(f"{r.name}: {r.summary}" for r in RECIPES.values()))
