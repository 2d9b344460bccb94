"""`vbench-async serve`: keep an engine and accept evaluation jobs over HTTP (docs/serve.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from .formatting import DefaultsHelpFormatter

if TYPE_CHECKING:
    from ..backends.factory import BackendKind
    from ..evaluation.run_config import RunConfig
    from ..serve.jobs import JobRecord
    from ..serve.paths import JobPaths
    from ..serve.server import EvalServer


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
        formatter_class=DefaultsHelpFormatter,  # never "(default: $X) (default: None)"
    )
    p.set_defaults(func=main)
    return p


# RunConfig's fields that are the server's own (`job` False in their metadata): set when it starts, for every job.
SERVE_FLAGS = ("backend", "cache_dir", "cache_max_gb", "concurrency", "loaders", "queue_size", "decode_workers")


def add_options(p: argparse.ArgumentParser) -> None:
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..evaluation.run_config import RunConfig
    from .console import add_verbose
    from .include import add_include_option
    from .options import add_fields, add_group

    add_fields(p, RunConfig, only=("model",))
    where = p.add_argument_group("listening")
    where.add_argument("--host", default="127.0.0.1", help="address to bind; beyond loopback a token is required")
    where.add_argument("--port", type=int, default=8765, help="port (0: any free port, printed at start)")
    where.add_argument("--token", help="require `Authorization: Bearer TOKEN` on every request (default: "
                                       "$VBENCH_ASYNC_SERVE_TOKEN, else a new secret written to a file only this "
                                       "user may read, which `run --server` and the client read themselves)")
    where.add_argument("--no-token", action="store_true",
                       help="on loopback, take requests without a token (any local user can then submit jobs that "
                            "read and write files as you)")
    where.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="another Host name clients reach it by (a reverse proxy's); repeatable")
    where.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="a web page origin (http://host:port) allowed to call it; none by default; repeatable")
    where.add_argument("--log-dir", type=Path, default=Path("runs") / "serve",
                       help="the server's own logs (LOG_DIR/logs/engine.log: the engine's output); each job also "
                            "writes its run directory's logs/engine.log")
    how = add_group(p, RunConfig, "how jobs run (a job may ask for another --concurrency)", only=SERVE_FLAGS)
    add_include_option(how)
    paths = p.add_argument_group("what jobs may read and write (any other path in a job is refused, HTTP 403)")
    paths.add_argument("--output-root", type=Path, default=Path("runs"), metavar="DIR",
                       help="a job's run directory (its output_dir, or runs/<model name>) must be inside DIR")
    paths.add_argument("--data-root", action="append", type=Path, default=[], metavar="DIR",
                       help="a folder a job may name as its data_root (or a folder inside it); repeatable. Without "
                            "one, jobs use the default data root only. A job's card folders (include) and suite "
                            "file must be inside a folder given with --include (or $VBENCH_ASYNC_INCLUDE)")
    paths.add_argument("--model-root", action="append", type=Path, default=[], metavar="DIR",
                       help="a folder whose model directories (checkpoints) a job may name as its model or judge "
                            "model; repeatable. Without one, a job's model is the server's --model, a built tiny-* "
                            "model or a hub id: any other local path is refused")
    paths.add_argument("--allow-outside-root", action="store_true",
                       help="let a job set selection.allow_outside_root (annotation paths outside its data root)")
    add_group(p, VLLMSettings)
    add_group(p, ServerSettings)
    add_verbose(p)


def base_config(args: argparse.Namespace) -> RunConfig:
    """The server's own settings (every job runs with them): RunConfig's fields from `serve`'s flags."""
    return _base_and_kind(args)[0]


def _base_and_kind(args: argparse.Namespace) -> tuple[RunConfig, BackendKind]:
    """`base_config` with its backend kind, resolved once here (and checked against the server settings)."""
    from ..backends.factory import backend_kind
    from ..backends.openai import ServerSettings
    from ..backends.vllm import VLLMSettings
    from ..evaluation.run_config import RunConfig
    from .options import from_args, values_from_args

    base = RunConfig(**values_from_args(RunConfig, args, only=("model", *SERVE_FLAGS)),
                     engine=from_args(VLLMSettings, args), server=from_args(ServerSettings, args), progress=False)
    kind = backend_kind(base.backend)
    kind.check(base.server)
    return base, kind


def main(args: argparse.Namespace) -> int:
    from .console import engine_console, engine_log_path

    base, kind = _base_and_kind(args)
    with engine_console(engine_log_path(args.log_dir), verbose=args.verbose, engine_in_process=kind.in_process):
        return _serve(args, base)


def eval_server(base: RunConfig, paths: JobPaths | None = None) -> EvalServer:
    """`serve`'s job worker: each finished job's run directory gets its own site, written as `run` writes a run's
    (in a process of its own, `logs/site.log`; the server writes one at a time); the pages are this layer's, so the
    hook is passed from here. `paths`: the folders jobs may use (default: run directories under ./runs only)."""
    from ..serve.server import EvalServer
    from .output import write_run_site_and_wait

    return EvalServer(base, write_site=write_run_site_and_wait, paths=paths)  # one site at a time


def job_paths(args: argparse.Namespace) -> JobPaths:
    """The folders `serve`'s options allow jobs: its output root, data roots, card folders (--include and
    $VBENCH_ASYNC_INCLUDE, registered by now) and model folders (--model-root, and the server's own --model)."""
    from ..benchmarks.include import include_dirs
    from ..serve.paths import JobPaths

    for flag, folders in (("--data-root", args.data_root), ("--model-root", args.model_root)):
        for folder in folders:
            if not folder.expanduser().is_dir():
                raise UserError(f"{flag} {folder} is not a folder")
    return JobPaths.of(args.output_root, args.data_root, include_dirs(), args.allow_outside_root,
                       args.model_root).with_model(args.model)


def _serve(args: argparse.Namespace, base: RunConfig) -> int:
    import secrets

    from ..redact import remember
    from ..serve import client
    from ..serve.api import TOKEN_ENV, make_http_server
    token = args.token or os.environ.get(TOKEN_ENV) or None
    own = token is None and not args.no_token  # the default: a secret of this server's, in a file only we may read
    if own:
        token = secrets.token_urlsafe(32)  # replaced by the file's once the port is known
    paths = job_paths(args)
    evals = eval_server(base, paths)
    try:
        httpd = make_http_server(evals, args.host, args.port, token, args.allow_host, args.allow_origin)
    except UserError:
        evals.close()
        raise
    host, port = httpd.server_address[:2]
    token_file = None
    if own:
        try:
            token, token_file = client.create_token_file(port)
        except OSError as exc:
            httpd.server_close()
            evals.close()
            raise UserError(f"cannot write the server's token file {client.token_path(port)}: "
                            f"{exc.strerror or exc}; set VBENCH_ASYNC_HOME to a writable folder, or pass --token"
                            ) from None
        remember(token)
        httpd.token = token
    shown = f"[{host}]" if ":" in host else host
    needs = f" (token required: {token_file}, read by `run --server` itself)" if token_file else \
        " (token required)" if token else " (NO TOKEN: any local user can submit jobs)"
    print(f"vbench-async serve: {args.model} ({args.backend}) on http://{shown}:{port}{needs}; submit with "
          f"`vbench-async run --server http://{shown}:{port} ...`; run directories under {paths.output_root} "
          f"(--output-root); engine logs in {args.log_dir}/logs/engine.log; Ctrl-C stops", flush=True)
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
        if token_file is not None:
            client.remove_token_file(token_file, token)
    return 0


# -- `run --server URL`: the same evaluation, as a job of a running server ---------------------------------------------


def job_from_run_args(args: argparse.Namespace) -> dict:
    """The job `vbench-async run` options describe: their RunConfig's JSON form, less the server's own settings
    (refused, by name, when the command line sets one), paths made absolute (the server's working directory
    differs)."""
    import dataclasses

    from ..evaluation.run_config import RunConfig
    from ..serve.jobs import server_owned
    from .run_options import config_from_args

    cfg = config_from_args(args, local=False)
    suite = cfg.selection.suite
    if suite and Path(suite).expanduser().is_file():
        suite = str(Path(suite).expanduser().resolve())

    def absolute(path: Path | None) -> Path | None:
        return path.expanduser().resolve() if path is not None else None

    cfg = dataclasses.replace(
        cfg, model=str(Path(cfg.model).resolve()) if Path(cfg.model).exists() else cfg.model,
        selection=dataclasses.replace(cfg.selection, suite=suite, data_root=absolute(cfg.selection.data_root)),
        output_dir=absolute(cfg.output_dir))
    full, default = cfg.to_json(), RunConfig(model=cfg.model).to_json()
    local = {f.name for f in dataclasses.fields(RunConfig) if f.metadata.get("local")}
    owned = [name for name in server_owned() if name not in local]
    given = [name for name in owned if full[name] != default[name]]
    if given:
        shown = []
        for name in given:
            if isinstance(full[name], dict):
                shown += [f"{name}.{k}" for k in full[name] if full[name][k] != default[name][k]]
            else:
                shown.append(name)
        raise UserError(f"--server: {', '.join(shown)} are the server's own settings, not a job's; start "
                        "`vbench-async serve` with them, or leave them out here")
    return {k: v for k, v in full.items() if k not in server_owned()}


def job_progress(record: JobRecord | dict) -> str:
    """"job 3: running, 12/66 samples"; before the server has planned the job, no count it does not know yet."""
    from ..serve.jobs import JobRecord

    job = JobRecord.of(record)
    done, total = job.progress.done, job.progress.total
    if total is None:
        count = f"{done} samples done, planning the rest" if done else "planning (frames, tokens, engine)"
    else:
        count = f"{done or 0}/{total} samples"
    return f"job {job.id}: {job.status}, {count}"


def run_on_server(args: argparse.Namespace) -> int:
    """Submit the run as a job, print its progress and, when it ends, the table `run` prints; Ctrl-C cancels it."""
    from ..results.rundir import site_log_path
    from ..results.summary_record import Summary
    from ..serve import client
    from ..serve.jobs import JobRecord
    from .output import print_table, write_run_site

    if args.mode == "preprocess":
        raise UserError("--server runs evaluations; fill the cache with `vbench-async preprocess`")
    submitted = JobRecord.from_json(client.submit(args.server, job_from_run_args(args), args.server_token), "job")
    job_id = str(submitted.id)
    print(f"job {job_id} submitted to {args.server}", file=sys.stderr, flush=True)
    shown = {"last": None}

    def progress(record: dict) -> None:
        line = job_progress(record)
        if line != shown["last"] and not args.no_progress:
            print(line, file=sys.stderr, flush=True)
            shown["last"] = line

    try:
        job = JobRecord.from_json(client.wait(args.server, job_id, args.server_token, on_progress=progress), "job")
    except KeyboardInterrupt:
        client.cancel(args.server, job_id, args.server_token)
        job = JobRecord.from_json(client.wait(args.server, job_id, args.server_token), "job")
        print(f"job {job_id} cancelled; finished results are kept in {job.run_dir}", file=sys.stderr)
        raise
    if job.status == "failed":
        raise UserError(f"job {job_id} failed on the server: {job.error}")
    if not job.summary or job.run_dir is None:  # the job record carries the run's summary once it ended
        print(f"job {job_id} {job.status}; no summary", file=sys.stderr)
        return 1
    summary = Summary.from_json(job.summary, f"job {job_id}'s summary")
    print()
    print_table(summary)
    print(f"\nresults: {job.run_dir}/results/   summary: {job.run_dir}/summary.json   "
          f"(job {job_id}, {job.wall_s} s on the server)")
    run_dir = Path(job.run_dir)
    if job.site:  # the server writes it: a second writer here would race it
        print(f"leaderboard: {job.site} (written in the background by the server once no job follows; "
              f"{site_log_path(run_dir)} says when it is done)")
    elif not args.no_site and run_dir.is_dir():  # a server that writes no site (a library's EvalServer, an older one)
        print(f"leaderboard: {write_run_site(run_dir)}")
    failed = summary.n_failed()
    if failed:
        print(f"{failed} sample(s) failed; their reasons are in the result files (field 'error').", file=sys.stderr)
    return 0 if job.status == "done" and not failed and summary.complete else 1
