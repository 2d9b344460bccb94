"""`vbench-async serve`: keep an engine and accept evaluation jobs over HTTP (docs/serve.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ..errors import UserError


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "serve",
        help="keep an engine and run evaluation jobs submitted over HTTP (run --server URL)",
        description=(
            "Start an evaluation server for MODEL: jobs (benchmarks or a suite, frames, sampling, optionally another "
            "model or checkpoint) are submitted over HTTP, by `vbench-async run --server URL` or a training loop, and "
            "run one at a time against one kept engine, so only the first job pays engine start-up. A job for another "
            "model replaces the engine. Each job writes an ordinary run directory. Binds to 127.0.0.1; any other "
            "address needs --token. See docs/serve.md."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.set_defaults(func=main)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    from ..backends.factory import BACKENDS
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from .include import add_include_option
    from .options import add_group

    p.add_argument("--model", required=True,
                   help="the model jobs evaluate unless they name another (a directory, hub id or tiny-* model)")
    where = p.add_argument_group("listening")
    where.add_argument("--host", default="127.0.0.1", help="address to bind; beyond loopback a token is required")
    where.add_argument("--port", type=int, default=8765, help="port (0: any free port, printed at start)")
    where.add_argument("--token", help="require `Authorization: Bearer TOKEN` on every request "
                                       "(default: $VBENCH_ASYNC_SERVE_TOKEN)")
    where.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="another Host name clients reach it by (a reverse proxy's); repeatable")
    where.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="a web page origin (http://host:port) allowed to call it; none by default; repeatable")
    how = p.add_argument_group("how jobs run")
    how.add_argument("--backend", default="vllm", choices=BACKENDS,
                     help="vllm: an in-process engine kept between jobs; openai: an OpenAI-compatible server "
                          "(--base-url); hf: transformers, kept loaded")
    how.add_argument("--cache-dir", type=Path,
                     help="frame cache (default: $VBENCH_ASYNC_CACHE or ~/.cache/vbench-async/frames)")
    how.add_argument("--cache-max-gb", type=float, help="frame-cache budget (default: $VBENCH_ASYNC_CACHE_MAX_GB)")
    how.add_argument("--concurrency", type=int, default=16, help="requests in flight (a job may ask for another)")
    how.add_argument("--loaders", type=int, default=2, help="frame-loading threads")
    how.add_argument("--workers", type=int, default=2, help="decoder processes for preprocessing")
    add_include_option(how)
    add_group(p, VLLMSettings)
    add_group(p, ServerSettings)


def main(args: argparse.Namespace) -> int:
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..runner import RunConfig
    from ..serve.api import TOKEN_ENV, make_http_server
    from ..serve.server import EvalServer
    from .options import from_args

    if args.backend == "openai" and not args.base_url:
        raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    if args.concurrency < 1 or args.loaders < 1 or args.workers < 1:
        raise UserError("--concurrency, --loaders and --workers must be at least 1")
    base = RunConfig(model=args.model, backend=args.backend, cache_dir=args.cache_dir, cache_max_gb=args.cache_max_gb,
                     concurrency=args.concurrency, loaders=args.loaders, decode_workers=args.workers,
                     engine=from_args(VLLMSettings, args), server=from_args(ServerSettings, args), progress=False)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    evals = EvalServer(base)
    try:
        httpd = make_http_server(evals, args.host, args.port, token, args.allow_host, args.allow_origin)
    except UserError:
        evals.close()
        raise
    host, port = httpd.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"vbench-async serve: {args.model} ({args.backend}) on http://{shown}:{port}"
          f"{' (token required)' if token else ''}; submit with `vbench-async run --server http://{shown}:{port} "
          "...`; Ctrl-C stops", flush=True)
    # SIGTERM (a scheduler, `timeout`) stops the server as Ctrl-C does; shutdown() must come from another thread.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown, daemon=True).start())
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print("vbench-async serve: stopping (running jobs are cancelled; their finished results are kept)",
              file=sys.stderr, flush=True)
        httpd.server_close()
        evals.close()
    return 0


# -- `run --server URL`: the same evaluation, as a job of a running server ---------------------------------------------


def job_from_run_args(args: argparse.Namespace) -> dict:
    """The job `vbench-async run` options describe (paths made absolute: the server's working directory differs)."""
    import dataclasses

    from ..backends.base import SamplingParams
    from ..benchmarks.include import include_dirs
    from ..benchmarks.selection import Selection
    from ..frames.overrides import FrameOverrides
    from .options import from_args

    selection = from_args(Selection, args)
    if selection.empty:
        raise UserError("say what to evaluate: --suite NAME or --benchmarks a,b (see `vbench-async list`)")
    suite = selection.suite
    if suite and Path(suite).expanduser().is_file():
        suite = str(Path(suite).expanduser().resolve())

    def absolute(path: Path | None) -> str | None:
        return str(path.expanduser().resolve()) if path is not None else None

    return {
        "model": str(Path(args.model).resolve()) if Path(args.model).exists() else args.model,
        "suite": suite, "benchmarks": list(selection.benchmarks or ()),
        "data_root": absolute(selection.data_root), "max_samples": selection.max_samples,
        "allow_outside_root": selection.allow_outside_root,
        "include": [str(p) for p in include_dirs()],
        "output_dir": absolute(args.output_dir),
        "frames": from_args(FrameOverrides, args).to_dict(),
        "sampling": dataclasses.asdict(from_args(SamplingParams, args)),
        "thinking": args.thinking, "mode": args.mode, "retry_failed": args.retry_failed,
        "concurrency": args.concurrency,
    }


def run_on_server(args: argparse.Namespace) -> int:
    """Submit the run as a job, print its progress and, when it ends, the table `run` prints; Ctrl-C cancels it."""
    from ..serve import client
    from .output import print_table

    if args.mode == "preprocess":
        raise UserError("--server runs evaluations; fill the cache with `vbench-async preprocess`")
    job = client.submit(args.server, job_from_run_args(args), args.server_token)
    print(f"job {job['id']} submitted to {args.server}", file=sys.stderr, flush=True)
    shown = {"last": None}

    def progress(record: dict) -> None:
        p = record.get("progress") or {}
        line = f"job {record['id']}: {record['status']}, {p.get('done')}/{p.get('total')} samples"
        if line != shown["last"] and not args.no_progress:
            print(line, file=sys.stderr, flush=True)
            shown["last"] = line

    try:
        job = client.wait(args.server, job["id"], args.server_token, on_progress=progress)
    except KeyboardInterrupt:
        client.cancel(args.server, job["id"], args.server_token)
        job = client.wait(args.server, job["id"], args.server_token)
        print(f"job {job['id']} cancelled; finished results are kept in {job.get('run_dir')}", file=sys.stderr)
        raise
    if job["status"] == "failed":
        raise UserError(f"job {job['id']} failed on the server: {job.get('error')}")
    summary = job.get("summary")
    if not summary:
        print(f"job {job['id']} {job['status']}; no summary", file=sys.stderr)
        return 1
    print()
    print_table(summary)
    print(f"\nresults: {job['run_dir']}/results/   summary: {job['run_dir']}/summary.json   "
          f"(job {job['id']}, {job['wall_s']} s on the server)")
    failed = sum(b.get("n_failed", 0) for b in summary["benchmarks"].values())
    if failed:
        print(f"{failed} sample(s) failed; their reasons are in the result files (field 'error').", file=sys.stderr)
    return 0 if job["status"] == "done" and not failed and summary.get("complete") else 1
