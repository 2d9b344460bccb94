"""`vbench-async run`: evaluate a model on benchmarks or a suite."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a model on a suite or benchmarks",
        description=(
            "Evaluate MODEL on the benchmarks of a suite. Frames come from the content-addressed cache (decoded on a "
            "miss, in a worker process, while the engine starts); results are appended per sample to "
            "OUTPUT_DIR/results/*.jsonl, so re-running the same command resumes where it stopped."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=main)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every option of `run` (also `plan`'s: a plan is made with exactly the options of the run it plans)."""
    what = p.add_argument_group("what to evaluate")
    what.add_argument("--model", required=True,
                      help="model directory, hub id, or a built-in tiny model: tiny-qwen2-vl, tiny-qwen2.5-vl, "
                           "tiny-qwen3-vl (random weights, for testing the pipeline)")
    what.add_argument("--suite", help="suite name (demo, all, mc, grounding, long, reasoning) or a suite YAML file")
    what.add_argument("--benchmarks", help="comma-separated benchmark ids, e.g. videomme@64f,mvbench")
    what.add_argument("--data-root", type=Path, help="folder holding the annotation files and video folders")
    what.add_argument("--max-samples", type=int, help="evaluate only the first N records of each benchmark")
    what.add_argument("--allow-outside-root", action="store_true",
                      help="accept annotation paths that point outside the data root (absolute, ../, symlinks)")

    out = p.add_argument_group("output")
    out.add_argument("--output-dir", type=Path, help="run directory (default: runs/<model name>)")
    out.add_argument("--cache-dir", type=Path,
                     help="frame cache (default: $VBENCH_ASYNC_CACHE or ~/.cache/vbench-async/frames)")
    out.add_argument("--no-site", action="store_true", help="do not write the HTML leaderboard into the run directory")
    out.add_argument("--no-progress", action="store_true", help="no progress bars")

    how = p.add_argument_group("how")
    how.add_argument("--backend", default="vllm", choices=["vllm", "openai", "hf"],
                     help="vllm: in-process AsyncLLM; openai: an OpenAI-compatible server; hf: transformers generate")
    how.add_argument("--mode", default="auto", choices=["auto", "preprocess", "eval", "both"],
                     help="preprocess: fill the frame cache only; eval: no preprocessing pass (misses are decoded in "
                          "the background); both: preprocess, then evaluate; auto: eval if >=90%% of videos are cached")
    how.add_argument("--retry-failed", action="store_true", help="re-run samples whose stored result is a failure")
    how.add_argument("--thinking", action="store_true", help="use the reasoning prompt variant")
    how.add_argument("--judge-model",
                     help="after the run, judge open-ended answers with this model (same backend kind and settings); "
                          "see `vbench-async judge`")
    how.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    how.add_argument("--loaders", type=int, default=2, help="frame-loading threads")
    how.add_argument("--queue-size", type=int, default=32, help="loaded samples waiting for a free request slot")
    how.add_argument("--workers", type=int, default=2, help="decoder processes for preprocessing")

    frames = p.add_argument_group("frames (override the benchmark's preset; part of the result config)")
    frames.add_argument("--max-frames", type=int, help="frame cap per video")
    frames.add_argument("--nframes", type=int, help="exact frame count (Qwen2.5-style sampling)")
    frames.add_argument("--fps", type=float, help="sampling rate in frames per second")
    frames.add_argument("--max-pixels", type=int, help="per-frame pixel cap")
    frames.add_argument("--total-pixels", type=int, help="per-video pixel budget")

    samp = p.add_argument_group("sampling (greedy by default)")
    samp.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy")
    samp.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    samp.add_argument("--top-k", type=int, default=0, help="0 disables top-k")
    samp.add_argument("--max-tokens", type=int, default=256, help="maximum new tokens per answer")
    samp.add_argument("--seed", type=int, default=0, help="sampling seed (recorded in the manifest)")
    samp.add_argument("--repetition-penalty", type=float, default=1.0, help="1.0 disables it")
    samp.add_argument("--presence-penalty", type=float, default=0.0, help="0.0 disables it")

    eng = p.add_argument_group("vLLM engine")
    eng.add_argument("--max-model-len", type=int,
                     help="context length the engine reserves per sequence (default: the longest planned prompt + "
                          "--max-tokens + a margin, capped by the model's max_position_embeddings)")
    eng.add_argument("--max-num-seqs", type=int, default=16, help="sequences the engine runs at once")
    eng.add_argument("--max-num-batched-tokens", type=int,
                     help="per-step token budget (chunked prefill size; default: vLLM's, raised to the largest "
                          "planned video's embeddings)")
    eng.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="share of GPU memory vLLM may use")
    eng.add_argument("--kv-cache-bytes", type=int,
                     help="explicit KV cache size in bytes (default on CPU: 64 MiB; else from memory utilisation)")
    eng.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per engine replica")
    eng.add_argument("--data-parallel-size", type=int, default=1, help="engine replicas on this node")
    eng.add_argument("--dtype", default="auto", help="weights dtype (auto: the checkpoint's; bfloat16 on CPU)")
    eng.add_argument("--enforce-eager", action="store_true", help="disable CUDA graphs / torch.compile")

    scale = p.add_argument_group("scale-out (docs/scale-out.md)")
    scale.add_argument("--shard", metavar="K/N",
                       help="evaluate only shard K of N (K counts from 0): a cost-balanced slice that keeps each "
                            "video's questions together, written to its own result files in OUTPUT_DIR; the last "
                            "shard to finish merges them (or run `vbench-async merge OUTPUT_DIR`). 'auto' reads it "
                            "from the launcher: VBENCH_ASYNC_SHARD, torchrun's RANK/WORLD_SIZE, a Slurm array's "
                            "SLURM_ARRAY_TASK_ID/COUNT, or srun's SLURM_PROCID/SLURM_NTASKS")
    scale.add_argument("--gpus", default="auto", metavar="LIST|auto",
                       help="devices for this process's engine, tensor-parallel x data-parallel of them, e.g. 2,3 "
                            "(indices into CUDA_VISIBLE_DEVICES when that is set). auto: with several processes per "
                            "node (torchrun LOCAL_RANK, srun SLURM_LOCALID) process L takes the L-th block; "
                            "otherwise CUDA_VISIBLE_DEVICES is left as it is")
    scale.add_argument("--no-video-affinity", action="store_true",
                       help="with --data-parallel-size > 1, let vLLM's load balancer place every request instead of "
                            "sending all questions of one video to the same replica (which reuses its prefix cache)")

    srv = p.add_argument_group("openai backend")
    srv.add_argument("--base-url", help="server URL, e.g. http://127.0.0.1:8000/v1")
    srv.add_argument("--served-model", help="model name the server expects (default: --model)")
    srv.add_argument("--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY or none)")
    srv.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    srv.add_argument("--max-retries", type=int, default=4, help="retries on 429/5xx/connection errors")


def config_from_args(args: argparse.Namespace, shard: object = None):
    """The runner.RunConfig of parsed `run` options."""
    from ..backends.base import SamplingParams
    from ..runner import RunConfig

    if not args.suite and not args.benchmarks:
        raise UserError("say what to evaluate: --suite NAME or --benchmarks a,b (see `vbench-async list`)")

    frame_overrides = {
        k: v
        for k, v in dict(max_frames=args.max_frames, nframes=args.nframes, fps=args.fps,
                         max_pixels=args.max_pixels, total_pixels=args.total_pixels).items()
        if v is not None
    }
    if args.backend == "vllm":
        backend_options = dict(
            max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens, gpu_memory_utilization=args.gpu_memory_utilization,
            kv_cache_bytes=args.kv_cache_bytes, tensor_parallel_size=args.tensor_parallel_size,
            data_parallel_size=args.data_parallel_size, dtype=args.dtype, enforce_eager=args.enforce_eager,
            dp_video_affinity=not args.no_video_affinity,
        )
    elif args.backend == "openai":
        if not args.base_url:
            raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        backend_options = dict(base_url=args.base_url, served_model=args.served_model, api_key=args.api_key,
                               timeout_s=args.request_timeout, max_retries=args.max_retries,
                               concurrency=args.concurrency)
    else:
        backend_options = {}
    return RunConfig(
        model=args.model,
        suite=args.suite,
        benchmarks=[b.strip() for b in args.benchmarks.split(",") if b.strip()] if args.benchmarks else None,
        data_root=args.data_root,
        output_dir=args.output_dir,
        cache_dir=args.cache_dir,
        backend=args.backend,
        mode=args.mode,
        thinking=args.thinking,
        sampling=SamplingParams(
            temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_tokens=args.max_tokens,
            seed=args.seed, repetition_penalty=args.repetition_penalty, presence_penalty=args.presence_penalty,
        ),
        frame_overrides=frame_overrides,
        concurrency=args.concurrency,
        loaders=args.loaders,
        queue_size=args.queue_size,
        preprocess_workers=args.workers,
        retry_failed=args.retry_failed,
        max_samples=args.max_samples,
        allow_outside_root=args.allow_outside_root,
        backend_options=backend_options,
        progress=not args.no_progress,
        write_site=not args.no_site,
        shard=shard,
    )


def main(args: argparse.Namespace) -> int:
    from ..launcher import apply_devices, resolve_shard, select_devices

    shard = resolve_shard(args.shard)
    if args.backend == "vllm":  # before anything touches CUDA: the engine processes inherit the restriction
        apply_devices(select_devices(args.gpus, args.tensor_parallel_size * args.data_parallel_size))

    from ..results.report import print_table
    from ..runner import run
    from .plan import print_plan_lines

    cfg = config_from_args(args, shard)
    try:
        summary = run(cfg, on_plan=print_plan_lines)
    except Exception as exc:
        from ..backends.base import EngineDead

        if isinstance(exc, EngineDead):
            print(f"vbench-async: the engine stopped: {exc}\nFinished results are kept; re-run the same command "
                  f"to resume.", file=sys.stderr)
            return 3
        raise
    if args.judge_model:
        from ..judge import judge_after_run

        summary = {**judge_after_run(Path(summary["run_dir"]), cfg, args.judge_model), "run_dir": summary["run_dir"]}
    print()
    print_table(summary)
    run_dir = summary["run_dir"]
    if shard is not None:
        merged = "all shards done, merged into summary.json" if summary.get("merged") else \
            f"merge when all shards are done: vbench-async merge {run_dir}"
        print(f"\nshard {shard}: {run_dir}/summary.{shard.tag}.json ({merged})")
    if shard is None or summary.get("merged"):
        print(f"\nresults: {run_dir}/results/   summary: {run_dir}/summary.json")
    if summary.get("leaderboard"):
        print(f"leaderboard: {summary['leaderboard']}")
    failed = sum(b.get("n_failed", 0) for b in summary["benchmarks"].values())
    if failed:
        print(f"{failed} sample(s) failed; their reasons are in the result files (field 'error').", file=sys.stderr)
    if summary.get("not_run"):
        print(f"not run (no data): {', '.join(summary['not_run'])}; see `vbench-async data check`.", file=sys.stderr)
    # Exit code says whether anything failed: 0 all good, 1 some samples failed or the run is partial.
    code = 0 if not failed and summary["complete"] else 1
    if code and shard is not None and summary["complete"]:
        from ..launcher import gang_launcher

        launcher = gang_launcher()
        if launcher:
            # Every sample of this shard has its line: exit 1 would make the launcher kill the shards still running.
            # The failures stay in the result files, the summaries and `vbench-async merge`'s exit code.
            print(f"shard {shard}: exit 0 under {launcher} although {failed} sample(s) failed, so the other shards "
                  f"keep running; `vbench-async merge {run_dir}` exits 1 while any sample failed.", file=sys.stderr)
            code = 0
    return code
