"""`vbench-async preprocess`: fill the frame cache for a suite or benchmarks, without loading any model."""

from __future__ import annotations

import argparse
import sys

from .. import families
from ..errors import UserError
from .formatting import DefaultsHelpFormatter

FAMILIES = tuple(families.names())
# RunConfig's settings a preprocessing pass takes (declared there once: the same flags, defaults and bounds as `run`).
PREPROCESS_FLAGS = ("recipe", "decode_workers", "cache_dir", "cache_max_gb", "retry_failed", "progress")


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "preprocess",
        help="decode, sample and resize the videos of a suite into the frame cache",
        description=(
            "Decode every video of the chosen benchmarks once, with the frame settings `run` will use, and store "
            "the frames in the content-addressed cache. Videos already cached are reused, videos that failed before "
            "are reported from their failure record (see --retry-failed), and the same video used by several "
            "benchmarks is decoded once. A second run over the same suite decodes nothing."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    from ..benchmarks.selection import Selection
    from ..evaluation.run_config import RunConfig
    from ..frames.frame_settings import FrameSettings
    from .formatting import bounded
    from .include import add_include_option
    from .options import add_group, add_shard_option

    what = add_group(p, Selection, "what to preprocess")
    add_include_option(what)
    model = what.add_mutually_exclusive_group()
    model.add_argument("--model", help="model directory or hub id; its family decides the resize factor")
    model.add_argument("--family", choices=FAMILIES, help="model family, instead of --model")

    how = add_group(p, RunConfig, "how", only=PREPROCESS_FLAGS)
    how.add_argument("--decoder", default=None,
                     help="video decoder: pyav (default), decord or opencv; does not change the cached frames' key")
    how.add_argument("--timeout", type=bounded(float, above=0), default=120.0,
                     help="seconds one video may take before its worker is killed and the video marked failed")
    add_shard_option(how, "decode only the videos of shard K of N, split as `run --shard K/N` splits them, so N "
                          "machines can fill one shared cache together; concurrent writers are safe (entries appear "
                          "atomically)")

    add_group(p, FrameSettings, "frames (override the benchmark's preset; must match the later `run`)")


def main(args: argparse.Namespace) -> int:
    from ..benchmarks import recipes
    from ..benchmarks.selection import Selection
    from ..evaluation.launcher import resolve_shard
    from ..frames import DEFAULT_DECODER, FrameCache, preprocess
    from ..frames.frame_settings import FrameSettings
    from ..models import family_ref, resolve
    from ..sharding import shard_slice
    from .options import from_args

    selection = from_args(Selection, args)
    if selection.empty:
        raise UserError("say what to preprocess: --suite NAME or --benchmarks a,b (see `vbench-async list`)")
    if not (args.family or args.model):
        raise UserError("say which model the frames are for: --model PATH_OR_ID or --family " + "|".join(FAMILIES))
    # The checkpoint's own frame settings (a fixed-size family's side) under the flags, exactly as `run` has them;
    # --family alone names a family whose checkpoints decide no frame setting.
    model = family_ref(args.family) if args.family else resolve(args.model)
    family = model.family
    overrides = from_args(FrameSettings, args)
    benchmarks = selection.resolve()
    recipe = recipes.get(args.recipe) if args.recipe else None
    for bench in benchmarks:  # a recipe's frames, as `run --recipe` will ask for them
        bench.use_recipe(recipe, None)
    loaded = [(bench, bench.frame_spec(model, overrides), selection.samples(bench)) for bench in benchmarks]
    shard = resolve_shard(args.shard)
    if shard is not None:
        loaded = shard_slice(shard, loaded, selection.data_root, selection.allow_outside_root)

    jobs, skipped = [], 0
    for bench, spec, samples in loaded:
        found, left_out = bench.video_jobs(samples, [spec], selection.data_root, selection.allow_outside_root)
        jobs += found
        skipped += len(left_out)
        for why in filter(None, left_out):  # unsafe paths: reported, not decoded
            print(f"skipping {why}", file=sys.stderr)

    cache = FrameCache.at(args.cache_dir, args.cache_max_gb, decoder=args.decoder or DEFAULT_DECODER,
                          timeout_s=args.timeout, workers=args.decode_workers)
    cache_dir = cache.root
    with cache:
        cache.reserve(jobs)  # under a budget, this call's entries never evict each other: the rest is deferred
        report = preprocess(jobs, cache, workers=args.decode_workers, retry_failed=args.retry_failed,
                            progress=not args.no_progress)
    print(f"{', '.join(b.id for b in benchmarks)} ({family}){f' shard {shard}' if shard else ''} -> {cache_dir}")
    print(report.summary() + (f"; {skipped} samples without a usable video" if skipped else ""))
    for failure in report.failures[:20]:
        print(f"  failed [{failure.kind}] {failure.video}: {failure.message}")
    if len(report.failures) > 20:
        print(f"  ... and {len(report.failures) - 20} more")
    # Failed videos are per-sample failures that `run` records; the preprocessing itself succeeded.
    return 0

