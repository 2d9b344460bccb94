"""`run`'s options, generated from RunConfig and its settings classes, and the RunConfig they describe (`run`, `plan`
and `run --server` read them alike)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:
    from ..evaluation.run_config import RunConfig
    from ..sharding import Shard


# RunConfig's own flags, by the group `--help` shows them in (the nested settings are groups of their own).
OUTPUT_FLAGS = ("output_dir", "name", "cache_dir", "cache_max_gb", "progress", "site")
HOW_FLAGS = ("recipe", "backend", "mode", "retry_failed", "thinking", "judge_model", "concurrency", "loaders",
             "queue_size", "decode_workers")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of `run` (and of `plan`, which plans exactly that run)."""
    from ..backends.openai import ServerSettings
    from ..backends.sampling_overrides import SamplingOverrides
    from ..backends.vllm import VLLMSettings
    from ..benchmarks.prompts import PromptSettings
    from ..benchmarks.selection import Selection
    from ..evaluation.run_config import RunConfig
    from ..frames.frame_settings import FIELDS, FrameSettings
    from .console import add_verbose
    from .include import add_include_option
    from .options import add_fields, add_group, add_shard_option

    what = add_group(p, Selection)
    add_include_option(what)
    add_fields(what, RunConfig, only=("model",))

    add_group(p, RunConfig, "output", only=OUTPUT_FLAGS)

    how = add_group(p, RunConfig, "how", only=HOW_FLAGS)
    field_ = next(f for f in dataclasses.fields(RunConfig) if f.name == "ablation")
    how.add_argument("--ablation", dest="ablation", type=ablation_list, action=_Ablations, default=None,
                     metavar="KIND[,KIND...]", help=field_.metadata["help"] + "; a list such as none,blank runs "
                     "each on one engine (none: the real frames, in OUTPUT_DIR; each ablation in "
                     "OUTPUT_DIR/ablation-KIND) and prints their scores side by side")
    p.set_defaults(ablations=None)
    add_group(p, PromptSettings)

    frames = add_group(p, FrameSettings, exclude=("max_frames",))
    frames.add_argument("--max-frames", dest="max_frames", type=frame_budgets, action=_Budgets, default=None,
                        metavar="N[,N...]", help=FIELDS["max_frames"].metadata["help"])
    p.set_defaults(frame_budgets=None)
    add_group(p, SamplingOverrides)
    add_group(p, VLLMSettings)

    scale = p.add_argument_group("scale-out (docs/scale-out.md)")
    add_shard_option(scale, "evaluate only shard K of N: a cost-balanced slice that keeps each video's questions "
                            "together, written to its own result files in OUTPUT_DIR; the last shard to finish merges "
                            "them (or run `vbench-async merge OUTPUT_DIR`)")
    scale.add_argument("--gpus", default="auto", metavar="LIST|auto",
                       help="devices for this process's engine, tensor-parallel x data-parallel of them, e.g. 2,3 "
                            "(indices into CUDA_VISIBLE_DEVICES when that is set). auto: with several processes per "
                            "node (torchrun LOCAL_RANK, srun SLURM_LOCALID) process L takes the L-th block; "
                            "otherwise CUDA_VISIBLE_DEVICES is left as it is")

    add_group(p, ServerSettings)
    add_verbose(p)

    remote = p.add_argument_group("evaluation server (docs/serve.md)")
    remote.add_argument("--server", metavar="URL",
                        help="submit the run as a job to `vbench-async serve` at URL and wait for it: the job is this "
                             "command's run settings; the server's backend, engine and frame cache are used (setting "
                             "one of them here is refused)")
    remote.add_argument("--server-token", help="the server's token (default: $VBENCH_ASYNC_SERVE_TOKEN)")


def frame_budgets(text: str) -> tuple[int, ...]:
    """`--max-frames 32` or `--max-frames 16,32,64`: whole numbers, each within FrameSettings.max_frames' bounds."""
    from ..frames.frame_settings import bound_problem

    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        budgets = tuple(int(p) for p in parts)
    except ValueError:
        budgets = ()
    if not budgets:
        raise argparse.ArgumentTypeError(f"not a frame count or a comma-separated list of them: {text!r}")
    why = next(filter(None, (bound_problem("max_frames", b) for b in budgets)), None)
    if why:
        raise argparse.ArgumentTypeError(why if len(budgets) == 1 else f"each frame count {why} (in {text!r})")
    return budgets


def ablation_list(text: str) -> tuple[str | None, ...]:
    """`--ablation blank` or `none,blank,reverse` (none: the real frames)."""
    from ..frames.ablation import ABLATIONS

    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p != "none" and p not in ABLATIONS]
    if not parts or unknown:
        raise argparse.ArgumentTypeError(f"unknown ablation {', '.join(unknown) or repr(text)}; choose from none, "
                                         + ", ".join(ABLATIONS))
    if len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"an ablation is listed twice: {text!r}")
    return tuple(None if p == "none" else p for p in parts)


class _Ablations(argparse.Action):
    """`--ablation blank` or `none,blank`: the first is the run's `ablation`; all of them, in `ablations`."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values[0])
        namespace.ablations = values


class _Budgets(argparse.Action):
    """`--max-frames 32` or `16,32,64`: the first is the run's frame cap (`max_frames`); all of them, in
    `frame_budgets`, a sweep's budgets."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values[0])
        namespace.frame_budgets = values


def config_from_args(args: argparse.Namespace, shard: Shard | None = None, local: bool = True) -> RunConfig:
    """The RunConfig of parsed `run` options (also `plan`'s and `run --server`'s): every field from its flag.
    `local` False (a job for a server): the data root and the backend are the server's to check."""
    from ..backends.factory import backend_kind
    from ..backends.openai import ServerSettings
    from ..backends.sampling_overrides import SamplingOverrides
    from ..backends.vllm import VLLMSettings
    from ..benchmarks.include import include_dirs
    from ..benchmarks.prompts import PromptSettings
    from ..benchmarks.registry import check_data_root
    from ..benchmarks.selection import Selection
    from ..evaluation.run_config import RunConfig
    from ..frames.frame_settings import FrameSettings
    from .options import from_args, values_from_args

    selection = from_args(Selection, args, include=tuple(include_dirs()))  # --include and $VBENCH_ASYNC_INCLUDE
    if selection.empty:
        raise UserError("say what to evaluate: --suite NAME or --benchmarks a,b (see `vbench-async list`)")
    if local:
        check_data_root(selection.data_root)  # a broken data map fails now, whatever the benchmarks' sources
    cfg = RunConfig(
        **values_from_args(RunConfig, args),
        selection=selection,
        prompt=from_args(PromptSettings, args),
        sampling=from_args(SamplingOverrides, args),
        frame_overrides=from_args(FrameSettings, args),
        engine=from_args(VLLMSettings, args),
        server=from_args(ServerSettings, args),
        shard=shard,
    )
    if local:
        backend_kind(cfg.backend).check(cfg.server)
    return cfg
