"""A run's settings, declared once: `RunConfig` is the command line of `run`, `plan`, `preprocess`, `serve` and
`judge` (cli/options.py generates their flags from its fields), a server job's JSON and training validation's run
(`to_json`/`from_json`); with what the settings name: the model and the run directory. The runner (runner.py) is the
pass that carries a RunConfig out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection

from .. import settings
from ..backends.base import CONCURRENCY, SamplingParams
from ..backends.factory import BackendKind, backend_field, backend_kind
from ..backends.openai import ServerSettings
from ..backends.sampling_overrides import SamplingOverrides
from ..backends.vllm import VLLMSettings
from ..benchmarks.prompts import PromptSettings
from ..benchmarks.recipes import RECIPES, Recipe, recipe_help
from ..benchmarks.selection import Selection
from ..frames.ablation import ABLATIONS
from ..frames.frame_settings import FrameSettings
from ..frames.preprocess import WORKERS as DECODE_WORKERS
from ..homes import CACHE_DIR_HELP
from .pipeline import LOADERS, QUEUE_SIZE

if TYPE_CHECKING:
    from ..models import ModelRef

MODES = ("auto", "preprocess", "eval", "both")


MODEL_HELP = ("model directory, hub id, or a built-in tiny model: tiny-qwen2-vl, tiny-qwen2.5-vl, tiny-qwen3-vl, "
              "tiny-internvl, tiny-llava-onevision, tiny-glm-4.1v (random weights, for testing the pipeline), or a "
              "seeing model: seeing-qwen2.5-vl, seeing-qwen3-vl (trained on CPU to answer the `seeing` suite from the "
              "pixels); `vbench-async list --models` shows the families")
_COUNT = {"min": 1}
# What a judge model names, for `run --judge-model` and `judge --judge-model` (judge.JudgeConfig.model): the same
# setting (the judge pass's model), read the same way by the backend kind that runs it.
JUDGE_MODEL_HELP = ("judge model: a model directory, hub id or tiny-* model (vllm, hf), or the served model name "
                    "(openai)")


@dataclass
class RunConfig:
    """Every setting of a run, declared once: a field with a `help` is a command-line flag (`cli/options.py`), the
    nested settings are their own groups, and `to_json`/`from_json` are the form a server job and training validation
    pass (`settings.py`: the same bounds). Metadata `job` False: the server's own setting, refused in a job."""

    model: str = field(metadata={"help": MODEL_HELP})
    selection: Selection = field(default_factory=Selection)
    output_dir: Path | None = field(default=None, metadata={"help": "run directory (default: runs/<model name>)"})
    cache_dir: Path | None = field(default=None, metadata={
        "job": False, "help": CACHE_DIR_HELP})
    cache_max_gb: float | None = field(default=None, metadata={
        "job": False, "min": 0,
        "help": "keep the frame cache under this size: least recently used entries are evicted while the work goes "
                "on, never one this work still needs; what does not fit is decoded on demand (default: "
                "$VBENCH_ASYNC_CACHE_MAX_GB, else no limit)"})
    backend: str = backend_field(job=False)
    mode: str = field(default="auto", metadata={
        "choices": MODES,
        "help": "preprocess: fill the frame cache only; eval: no preprocessing pass (misses are decoded in the "
                "background); both: a preprocessing pass over every video, behind the evaluation, which starts as "
                "soon as the engine is ready; auto: eval if >=90%% of videos are cached, else both"})
    thinking: bool = field(default=False, metadata={"help": "use the reasoning prompt variant"})
    prompt: PromptSettings = field(default_factory=PromptSettings)  # which prompt variant each benchmark gets
    recipe: str | None = field(default=None, metadata={"choices": tuple(RECIPES), "help": recipe_help()})
    # The sampling fields the user set (unset: the recipe's, else the default): `run_sampling` is what the run uses.
    sampling: SamplingOverrides = field(default_factory=SamplingOverrides)
    frame_overrides: FrameSettings = field(default_factory=FrameSettings)  # over the benchmark card's frames
    concurrency: int | None = field(default=None, metadata={
        "help": "requests in flight (default: with the in-process vLLM engine, every pending request whose frames "
                "fit in a quarter of the memory, at least --max-num-seqs per replica, so the engine never waits for "
                f"the next request's frames to be processed; {CONCURRENCY} with a server or transformers)", **_COUNT})
    loaders: int = field(default=LOADERS, metadata={"job": False, "help": "frame-loading threads", **_COUNT})
    queue_size: int = field(default=QUEUE_SIZE, metadata={
        "job": False, "help": "loaded samples waiting for a free request slot", **_COUNT})
    decode_workers: int = field(default=DECODE_WORKERS, metadata={
        "job": False, "flag": "--workers", "help": "decoder processes for preprocessing", **_COUNT})
    retry_failed: bool = field(default=False, metadata={
        "help": "re-run samples whose stored result is a failure, and decode again videos that failed before "
                "(transient failures, such as a decode timeout or an overloaded server, are re-run anyway)"})
    engine: VLLMSettings = field(default_factory=VLLMSettings, metadata={"job": False})  # backend vllm
    server: ServerSettings = field(default_factory=ServerSettings, metadata={"job": False})  # backend openai
    progress: bool = field(default=True, metadata={"local": True, "flag": "--no-progress", "help": "no progress bars"})
    site: bool = field(default=True, metadata={
        "flag": "--no-site", "help": "do not write the HTML leaderboard into the run directory (a server job asks its "
                                     "server not to)"})
    # (K, N): evaluate only shard K of N (sharding.py); merge combines them. The CLI's --shard K/N|auto sets it.
    shard: tuple[int, int] | None = field(default=None, metadata={"job": False})
    name: str | None = field(default=None, metadata={
        "help": "the model's name in the summary, the tables and the leaderboard, and in the default run directory "
                "(default: from --model: the folder name, or parent_checkpoint-N for a checkpoint)"})
    ablation: str | None = field(default=None, metadata={
        "choices": tuple(ABLATIONS),
        "help": "evaluate with one part of the input taken away, to check that it reaches the model: "
                + "; ".join(f"{k}: {v}" for k, v in ABLATIONS.items())
                + " (its own result file; perf/ablations.py runs them all for a model)"})
    judge_model: str | None = field(default=None, metadata={
        "help": f"{JUDGE_MODEL_HELP}: after the run, judge the answers that wait for a judge with it (same backend "
                "kind and settings as the run); see `vbench-async judge`"})

    def to_json(self) -> dict[str, Any]:
        """The JSON form (a server job's body, training validation's run): `from_json` reads it back equal."""
        return settings.to_json(self)

    @classmethod
    def from_json(cls, data: Any, exclude: Collection[str] = ()) -> RunConfig:
        """A RunConfig from its JSON form, with the flags' bounds; UserError naming any unknown field, or a field of
        `exclude` (those the caller does not let be set)."""
        return settings.from_json(cls, data, exclude=exclude)


def recipe_of(cfg: RunConfig) -> Recipe | None:
    """The run's recipe (benchmarks/recipes.py), None without --recipe."""
    from ..benchmarks import recipes

    return recipes.get(cfg.recipe) if cfg.recipe else None


def run_sampling(cfg: RunConfig, benchmark: str | None = None) -> SamplingParams:
    """The sampling the run uses (the engine's seed, the manifest), or with `benchmark` (a card id) that benchmark's
    requests use (its config hash): the fields the user set over the recipe's over the defaults."""
    recipe = recipe_of(cfg)
    return recipe.sampling(cfg.sampling, benchmark) if recipe else cfg.sampling.over(SamplingParams())


def run_system_prompt(cfg: RunConfig) -> str | None:
    """The system turn every request of the run sends: the recipe's (None: none). Not in the config hash itself: the
    recipe's version covers it."""
    recipe = recipe_of(cfg)
    return recipe.system_prompt if recipe else None


def run_prompt_variant(cfg: RunConfig) -> str:
    """The run's prompt variant as the manifest records it: the user's, else the recipe's run-wide one, else the
    default (each benchmark's own, which a recipe may set per benchmark, is in its manifest entry)."""
    from ..benchmarks.prompts import DEFAULT_VARIANT

    recipe = recipe_of(cfg)
    return cfg.prompt.prompt_variant or (recipe.common.prompt_variant if recipe else None) or DEFAULT_VARIANT


def recorded(cfg: RunConfig) -> RunConfig:
    """`cfg` as the manifest writes it down: with the sampling and prompt variant the run used in place of the
    user's partial ones (a run without a recipe records what it always did)."""
    return dataclasses.replace(cfg, sampling=SamplingOverrides.every(run_sampling(cfg)),
                               prompt=PromptSettings(run_prompt_variant(cfg)))


def resolve_model(cfg: RunConfig) -> ModelRef:
    """The run's model, labelled with `cfg.name` when the user gave one."""
    from .. import models

    model = models.resolve(cfg.model)
    return dataclasses.replace(model, label=cfg.name) if cfg.name else model


def run_dir_for(cfg: RunConfig, model: ModelRef, root: Path = Path("runs")) -> Path:
    """Where a run writes: OUTPUT_DIR, or <root>/<model name> (runs/, or a server's output root)."""
    return Path(cfg.output_dir or root / model.display_name)


@dataclass(frozen=True)
class ResolvedRun:
    """What a run's settings name, worked out once where the run enters (`run`, a sweep, a server job) and passed
    down: the model (labelled with --name), its backend kind and the run directory. Below the entry point nothing
    resolves them again, so every way in names the same directory (runs/<name> with --name)."""

    model: ModelRef
    kind: BackendKind
    run_dir: Path


def resolve_run(cfg: RunConfig, root: Path = Path("runs")) -> ResolvedRun:
    """`cfg`'s model (with its label), backend kind and run directory (OUTPUT_DIR, else <root>/<model name>)."""
    model = resolve_model(cfg)
    return ResolvedRun(model, backend_kind(cfg.backend), run_dir_for(cfg, model, root))
