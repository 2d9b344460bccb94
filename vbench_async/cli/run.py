"""`vbench-async run`: evaluate a model on benchmarks or a suite."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UserError
from ..phases import mark
from ..process_exit import sigterm_as_ctrl_c
from ..results.rundir import discard_if_unused, has_site, site_log_path
from ..results.summary_record import Summary
from .failures import print_failures
from .formatting import DefaultsHelpFormatter
from .output import build_site_in_background, print_table, write_run_site, write_run_site_in_background

if TYPE_CHECKING:
    from ..evaluation.run_config import ResolvedRun, RunConfig
    from ..models import ModelRef
    from ..sharding import Shard


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "run",
        help="evaluate a model on a suite or benchmarks",
        description=(
            "Evaluate MODEL on the benchmarks of a suite. Frames come from the content-addressed cache (decoded on a "
            "miss, in worker processes, from while the engine starts and behind the first requests); results are "
            "appended per sample to "
            "OUTPUT_DIR/results/*.jsonl, so re-running the same command resumes where it stopped."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    from .run_options import add_run_options

    add_run_options(p)


def main(args: argparse.Namespace) -> int:
    from ..backends.factory import backend_kind
    from ..backends.vllm import VLLMSettings
    from ..evaluation.launcher import apply_devices, resolve_shard, select_devices
    from ..evaluation.run_config import resolve_run
    from .console import engine_console, engine_log_path

    if getattr(args, "server", None):
        from .serve import run_on_server

        return run_on_server(args)
    shard = resolve_shard(args.shard)
    from .run_options import config_from_args

    cfg = config_from_args(args, shard)
    if args.frame_budgets and len(args.frame_budgets) > 1:
        if args.ablations and len(args.ablations) > 1:
            raise UserError("--max-frames with several budgets and --ablation with several kinds: give one list")
        return sweep_main(args, cfg)
    if args.ablations and len(args.ablations) > 1:
        from .ablations import ablations_main

        return ablations_main(args, cfg)
    # The kind before the model (resolve_run below): the devices are chosen before anything touches CUDA.
    if backend_kind(cfg.backend).settings is VLLMSettings:  # the engine processes inherit the restriction
        apply_devices(select_devices(args.gpus, cfg.engine.tensor_parallel_size * cfg.engine.data_parallel_size))
    sigterm_as_ctrl_c()
    resolved = resolve_run(cfg)  # once, here: the runner writes where this says (runs/<name> with --name)
    out_dir = resolved.run_dir
    refuse_other_model(out_dir, resolved.model)
    fresh, fresh_parent = not out_dir.exists(), not out_dir.parent.exists()
    try:
        with engine_console(engine_log_path(out_dir), verbose=args.verbose,
                            engine_in_process=resolved.kind.in_process):
            return _run(args, cfg, shard, resolved)
    except UserError:
        if fresh:  # a usage error before the first result leaves no run directory behind
            discard_if_unused(out_dir, also_empty_parent=fresh_parent)
        raise


def _last_summary(out_dir: Path) -> Summary | None:
    """The run directory's summary as its last run left it: an empty one when it has none yet (nothing kept, no
    start-up timed), None when it cannot be read (the one error the reader raises)."""
    from ..results.rundir import read_summary, summary_path

    if not summary_path(out_dir).exists():
        return Summary()
    try:
        return read_summary(out_dir)
    except UserError:
        return None


def kept_line(out_dir: Path) -> str:
    """After Ctrl-C: how many results are safe on disk, and that the same command resumes."""
    summary = _last_summary(out_dir)
    count = f"{summary.n_total()} result(s) kept" if summary is not None else "finished results are kept"
    return f"{count} in {out_dir / 'results'}; re-run the same command to resume"


def starting_line(in_process: bool, out_dir: Path) -> str:
    """"starting engine (about N s)": the silence before the first progress line has a reason and a length (the
    last start-up of this run directory, else a typical one)."""
    if not in_process:  # a server is already up
        return ""
    summary = _last_summary(out_dir)
    last = summary.run.startup_s if summary is not None else None
    about = f"about {round(last)} s, as last time" if last is not None else \
        "usually 20-60 s on a CPU, longer for a large model"
    return f"starting engine ({about}); its own log: {out_dir / 'logs' / 'engine.log'}"


def _run(args: argparse.Namespace, cfg: RunConfig, shard: Shard | None, resolved: ResolvedRun) -> int:
    from ..evaluation.runner import run
    from .plan_view import print_plan_lines

    out_dir = resolved.run_dir
    engine = resolved.kind.describe_target(cfg.server)
    try:
        starting = starting_line(resolved.kind.in_process, out_dir)
        summary = run(cfg, on_plan=functools.partial(print_plan_lines, engine=engine, verbose=args.verbose,
                                                     starting=starting), resolved=resolved)
    except KeyboardInterrupt:
        # The partial summary is written; a site the run already had must not go on showing the old state. A run
        # without one gets none (building it would delay the exit).
        if not args.no_site and has_site(out_dir):
            write_run_site(out_dir)
        print(kept_line(out_dir), file=sys.stderr)
        raise
    run_dir = out_dir  # where the runner wrote (the summary's run_dir)
    if cfg.mode == "preprocess":
        return _print_preprocessed(summary, cfg)
    judge_pass = None
    if cfg.judge_model:
        from ..evaluation.judge_pass import judge_after_run
        from .judge_report import judge_pass_line

        judged = judge_after_run(resolved, cfg, cfg.judge_model)
        summary, judge_pass = judged.summary, judged.judge_pass
        summary.run_dir = str(run_dir)  # as the runner's summary has it
        print(judge_pass_line(judge_pass, run_dir))
    print()
    print_table(summary)
    mark("table")
    if shard is not None:
        merged = "all shards done, merged into summary.json" if summary.merged_now else \
            f"merge when all shards are done: vbench-async merge {run_dir}"
        print(f"\nshard {shard}: {run_dir}/summary.{shard.tag}.json ({merged})")
        if summary.merged_now:  # the last shard to finish shows the whole run's table
            from ..results.rundir import read_summary

            print(f"\nall {shard.count} shards:")
            print_table(read_summary(run_dir))
    if shard is None or summary.merged_now:
        print(f"\nresults: {run_dir}/results/   summary: {run_dir}/summary.json")
        if not args.no_site and args.mode != "preprocess":
            print(f"leaderboard: {write_run_site_in_background(run_dir)} (being written in the background; "
                  f"{site_log_path(run_dir)} says when it is done)")
            mark("site")
    failed = print_failures(run_dir, summary, selection=cfg.selection)
    if judge_pass is not None:  # the run's exit code says what its samples did; the judge's failures are said here
        from .judge_report import report_judge_failures

        report_judge_failures(judge_pass, run_dir)
    if summary.not_run:
        print(f"not run (no data): {', '.join(summary.not_run)}; see `vbench-async data check`.", file=sys.stderr)
    # Exit code says whether anything failed: 0 all good, 1 some samples failed or the run is partial.
    code = 0 if not failed and summary.complete else 1
    if code and shard is not None and summary.complete:
        from ..evaluation.launcher import gang_launcher

        launcher = gang_launcher()
        if launcher:
            # Every sample of this shard has its line: exit 1 would make the launcher kill the shards still running.
            # The failures stay in the result files, the summaries and `vbench-async merge`'s exit code.
            print(f"shard {shard}: exit 0 under {launcher} although {failed} sample(s) failed, so the other shards "
                  f"keep running; `vbench-async merge {run_dir}` exits 1 while any sample failed.", file=sys.stderr)
            code = 0
    return code


def sweep_main(args: argparse.Namespace, cfg: RunConfig) -> int:
    """`run --max-frames 16,32,64`: every budget's run, its table, and one site over all of them."""
    from ..evaluation.run_config import resolve_run
    from ..evaluation.sweep import budget_dir, run_sweep
    from .console import engine_console, engine_log_path
    from .plan_view import print_plan_lines

    sigterm_as_ctrl_c()
    budgets = list(args.frame_budgets)
    resolved = resolve_run(cfg)  # once, here: the budgets' directories go under runs/<name> with --name
    kind = resolved.kind
    in_process = kind.in_process

    def console(run_dir: Path):  # each budget's run gets `run`'s console, its engine's logs in its own directory
        return engine_console(engine_log_path(run_dir), verbose=args.verbose, engine_in_process=in_process)

    def on_plan(workload: Any, not_run: dict[str, str], budget: int, first: bool) -> None:
        # One start line for the sweep (the run that starts the engine); each later budget says it follows.
        if first:
            print_plan_lines(workload, not_run, engine=kind.describe_target(cfg.server), verbose=args.verbose,
                             starting=starting_line(in_process, budget_dir(resolved.run_dir, budget)))
        else:
            print_plan_lines(workload, not_run, verbose=args.verbose, then=f"max_frames={budget}")

    report, summaries = run_sweep(cfg, budgets, on_plan=on_plan, console=console, resolved=resolved)
    if report:
        print(f"frames for {len(budgets)} budgets: {report['unique']} entries, {report['cached']} written in "
              f"{report['passes']} decode pass(es), {report['reused']} reused, {report['failed']} failed")
    code = 0
    for budget, summary in zip(budgets, summaries):
        print(f"\nmax_frames={budget}: {summary.run_dir}")
        print_table(summary)
        if not args.no_site:  # each budget's directory is an ordinary run's: its own site too
            write_run_site(Path(str(summary.run_dir)))
        code = code or (1 if summary.n_failed() or not summary.complete else 0)
    from .next_step import budget_warnings

    for warning in budget_warnings(budgets, summaries):
        print(f"warning: {warning}", file=sys.stderr)
    if summaries and not args.no_site:
        base = Path(str(summaries[0].run_dir)).parent
        log = site_log_path(base)
        site = build_site_in_background([Path(str(s.run_dir)) for s in summaries], base / "leaderboard", log)
        print(f"\nleaderboard of the sweep: {site / 'index.html'} (being written in the background; {log} says "
              "when it is done)")
    return code


def _print_preprocessed(summary: Summary | Mapping[str, Any], cfg: RunConfig) -> int:
    """`--mode preprocess`: what the cache now holds, not a score table of samples nobody evaluated."""
    from ..frames import default_cache_dir
    from ..frames.preprocess import PreprocessReport

    stats = Summary.of(summary).run
    counts = {k: v for k, v in (stats.preprocess or {}).items() if k != "failures"}  # PreprocessReport.to_dict()
    print(f"preprocess -> {cfg.cache_dir or default_cache_dir()}: {PreprocessReport(**counts).summary()}")
    for f in stats.preprocess_failures()[:20]:
        print(f"  failed [{f.kind}] {f.video}: {f.message}")
    print("evaluate with the same command without --mode preprocess (the frames now come from the cache)")
    return 0  # failed videos are per-sample failures the evaluation records


def refuse_other_model(run_dir: Path, model: ModelRef) -> None:
    """A run directory holds one model's results: evaluating another into it would replace the summary (and mix the
    leaderboard's rows). Same name or same path is the same model (a re-run, a retrained checkpoint)."""
    from ..results.rundir import read_manifest, read_summary, summary_path

    manifest = read_manifest(run_dir)
    if manifest is not None and manifest.has("model"):
        held = manifest.model
        if model.name == held.name or model.path == held.path:
            return
        what = f"{held.name} ({held.path})"
    else:
        summary = read_summary(run_dir) if summary_path(run_dir).exists() else None
        if summary is None or summary.model in (None, model.display_name):
            return
        what = str(summary.model)
    raise UserError(f"{run_dir} holds the results of {what}, not {model.name}: evaluating {model.name} there would "
                    f"replace its summary.json. Choose another --output-dir (without one, runs go to "
                    f"runs/<model name>), or remove {run_dir} first.")
