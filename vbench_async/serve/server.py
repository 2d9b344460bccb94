"""The evaluation server's work: a queue of jobs, run one at a time by the ordinary runner against the kept engine.

Each job writes an ordinary run directory (results, summary.json, manifest), so a job's output is exactly what
`vbench-async run` with the same settings writes, and the same command resumes it. Cancelling a running job stops its
run as Ctrl-C stops `run`: the finished lines stay, a partial summary is written, in-flight requests are aborted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..backends.factory import backend_kind
from ..backends.kept import EngineKeeper, JobCancelled
from ..errors import EngineDead, UserError
from ..evaluation.run_config import RunConfig, resolve_run
from ..evaluation.runner import run
from ..redact import ScrubbingFormatter, scrub
from ..results.rundir import has_site, site_dir
from .jobs import Job, JobSpec, result_lines
from .paths import JobPaths

log = logging.getLogger(__name__)

# A finished job's site is started once no job has come for this long: a site build takes a core for seconds, and a
# client that sends its next job as the last one ends (a script over checkpoints) would otherwise have that job share
# the machine with the pages (perf/e2e.py's serve arm: ~0.5 s of a 6 s job on 2 cores).
SITE_GRACE_S = 2.0
# Sites are written one at a time, by a thread of their own (a build takes a core and ~100 MB for seconds: thirty
# finished jobs must not start thirty at once). A stopping server waits this long for the ones still queued.
SITE_CLOSE_S = 60.0


@dataclass
class _Running:
    job: Job
    loop: asyncio.AbstractEventLoop | None = None  # the run's event loop, once its backend starts
    lock: threading.Lock = field(default_factory=threading.Lock)


class EvalServer:
    """Jobs in, run directories out. `base` holds the server's settings (model, backend, engine, cache).
    `write_site(run_dir)` writes a finished job's own site and returns its index.html, as `run` does (it may take
    its time: sites are written one at a time, on a thread of their own, `_write_sites`); it is
    passed in because pages are the presentation layer's (`vbench-async serve` passes cli/output.py's). Sites wait
    while jobs follow each other (`SITE_GRACE_S`): the evaluations come first, the pages when the queue is idle.
    `paths`: the folders jobs may use (serve/paths.py; by default run directories under ./runs, no other data root,
    card folder or local model than the server's own and the built tiny models); a job naming another is refused when
    it is submitted."""

    def __init__(self, base: RunConfig, max_finished: int = 1000,
                 write_site: Callable[[Path], Path] | None = None, paths: JobPaths | None = None):
        self.base = base
        # The server's backend kind, once: every job runs on it (a job cannot set its backend, a server's own setting).
        self.kind = backend_kind(base.backend)
        # The server's own model is always a job's to name (a job that names none evaluates it).
        self.paths = (paths if paths is not None else JobPaths.of()).with_model(base.model)
        self._write_site = write_site
        self.keeper = EngineKeeper()
        self._jobs: dict[str, Job] = {}
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._running: _Running | None = None
        self._lock = threading.Lock()
        self._max_finished = max_finished
        self._sites_due: list[Path] = []  # finished jobs' run directories whose site waits for an idle queue
        self._sites_queued: list[Path] = []  # those handed to the site writer, not yet written (one at a time)
        self._site_queue: queue.Queue[Path | None] = queue.Queue()
        self._site_writer = threading.Thread(target=self._write_sites, name="serve-sites", daemon=True)
        self._site_writer.start()
        self._worker = threading.Thread(target=self._work, name="serve-jobs", daemon=True)
        self._worker.start()

    # -- the API the HTTP layer calls ------------------------------------------------------------------------------
    def submit(self, spec: JobSpec) -> Job:
        """Queue a job; PathRefused (HTTP 403) when it names a path the server's configuration does not allow."""
        self.paths.check(spec.run_config(self.base), self.kind)
        job = Job(spec)
        with self._lock:
            self._forget_old()
            self._jobs[job.id] = job
        self._queue.put(job.id)
        log.info("job %s queued: %s", job.id, spec.describe())
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def cancel(self, job_id: str) -> Job | None:
        """Cancel a queued job (it never starts) or a running one (its run stops at once, keeping what finished)."""
        job = self._jobs.get(job_id)
        if job is None or job.finished:
            return job
        with self._lock:  # against the worker taking it up at this moment
            job.cancel_requested.set()
            if job.status == "queued":  # the worker skips it when its turn comes
                job.status, job.finished_at = "cancelled", time.time()
                return job
        running = self._running
        if running is not None and running.job is job:
            with running.lock:
                if running.loop is not None:
                    try:
                        running.loop.call_soon_threadsafe(_raise_cancelled)
                    except RuntimeError:  # its loop has just closed: the run is writing its summary
                        pass
        return job

    def health(self) -> dict[str, Any]:
        counts = {s: sum(1 for j in self._jobs.values() if j.status == s) for s in ("queued", "running")}
        return {"ok": True, "model": self.base.model, "backend": self.base.backend, "jobs": counts,
                "sites_waiting": len(self._sites_due), "sites_queued": len(self._sites_queued),
                "paths": self.paths.describe(), **self.keeper.describe()}

    def close(self) -> None:
        """Cancel what is queued or running, wait for the running job's partial summary, stop the engine."""
        for job in self.jobs():
            self.cancel(job.id)
        self._queue.put(None)
        self._worker.join(timeout=300)
        self.keeper.close()
        self._site_queue.put(None)  # after the sites the worker queued as it stopped
        self._site_writer.join(timeout=SITE_CLOSE_S)
        for run_dir in list(self._sites_queued):
            log.warning("the site of %s was not written before the server stopped: `vbench-async leaderboard %s -o "
                        "%s` writes it", run_dir, run_dir, site_dir(run_dir))

    # -- the worker ------------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            try:
                job_id = self._queue.get(timeout=SITE_GRACE_S if self._sites_due else None)
            except queue.Empty:  # no job came: the waiting sites are written now
                self._start_sites()
                continue
            if job_id is None:
                self._start_sites()  # the server stops: the pages are still written (in processes of their own)
                return
            job = self._jobs.get(job_id)
            with self._lock:
                if job is None or job.cancel_requested.is_set():  # cancelled (and perhaps forgotten) while it waited
                    continue
                job.status, job.started_at = "running", time.time()
            self._run(job)

    def _run(self, job: Job) -> None:
        from ..benchmarks.include import included

        running = _Running(job)
        self._running = running
        scope = contextlib.ExitStack()  # the job's include folders are known to the registry for this job only
        cfg: RunConfig | None = None
        try:
            cfg = job.spec.run_config(self.base)
            self.paths.check(cfg, self.kind)  # again: a folder may have changed while the job waited
            scope.enter_context(included(*cfg.selection.include))  # its card folders, for this job only
            self.paths.check_suite(cfg.selection.suite)
            if not self.kind.in_process and cfg.model != self.base.model:
                raise UserError(f"this server sends requests to {self.base.server.base_url}, which serves "
                                f"{self.base.model}; start a server for {cfg.model} to evaluate it")
            # Once, here, as `run` does: <output root>/<name> with a job's `name`, else <output root>/<model name>;
            # its kind is the server's (`self.kind`).
            resolved = resolve_run(cfg, self.paths.output_root)
            cfg = dataclasses.replace(cfg, output_dir=resolved.run_dir)  # the manifest records where it wrote
            self.paths.check_run_dir(resolved.run_dir)
            job.run_dir = str(resolved.run_dir)
            kept = self.keeper.engine_settings(cfg.backend, resolved.model.path)
            if kept is not None:  # plan against the engine that will answer, not a fresh one's sizing
                cfg.engine = kept

            def on_plan(workload: Any, not_run: dict[str, str]) -> None:
                job.lines_before = result_lines(Path(job.run_dir))
                job.total = sum(b.n_samples for b in workload.benchmarks) if workload is not None else None

            def on_start(loop: asyncio.AbstractEventLoop) -> None:
                with running.lock:
                    running.loop = loop
                if job.cancel_requested.is_set():
                    loop.call_soon(_raise_cancelled)

            with job_log(Path(job.run_dir)):
                # the job record carries the summary as JSON: what a client reads back
                summary = run(cfg, on_plan=on_plan, backends=self.keeper.factory(on_start), resolved=resolved).to_json()
                if cfg.judge_model:  # as `run --judge-model` does: the same backend kind and settings
                    from ..evaluation.judge_pass import judge_after_run

                    summary = {**judge_after_run(resolved, cfg, cfg.judge_model).to_json(),
                               "run_dir": job.run_dir}
            if cfg.site:  # before the status: a client seeing "done" sees where the site will be
                job.site = self._site_due(Path(job.run_dir))
            job.summary, job.status = summary, "done"
        except KeyboardInterrupt:  # JobCancelled, as the runner re-raises it after writing the partial summary
            job.summary = _read_summary(job.run_dir)
            if cfg is not None and cfg.site and job.run_dir is not None and has_site(Path(job.run_dir)):
                job.site = self._site_due(Path(job.run_dir))  # as after `run`'s Ctrl-C: an old site must not stay
            job.status = "cancelled"
        except UserError as exc:
            job.status, job.error = "failed", scrub(str(exc))  # a busy run directory's note names a command
        except EngineDead as exc:  # finished lines are kept; the next job starts a new engine
            job.status, job.error = "failed", f"the engine stopped: {exc}"
            self.keeper.discard()
        except Exception as exc:  # noqa: BLE001 - one job's failure is its own; the server takes the next
            log.exception("job %s failed", job.id)
            job.status, job.error = "failed", scrub(f"{type(exc).__name__}: {exc}")
        finally:
            scope.close()
            job.finished_at = time.time()
            self._running = None
            log.info("job %s %s in %.1f s", job.id, job.status, job.finished_at - job.started_at)

    def _site_due(self, run_dir: Path) -> str | None:
        """Put the run directory's own site on the list the worker starts when the queue is idle; its index.html, or
        None for a server that writes no sites."""
        if self._write_site is None:
            return None
        if run_dir not in self._sites_due:
            self._sites_due.append(run_dir)
        return str(site_dir(run_dir) / "index.html")

    def _start_sites(self) -> None:
        """Hand every waiting site to the site writer, which writes them one at a time (`_write_sites`)."""
        due, self._sites_due = self._sites_due, []
        if self._write_site is None:  # nothing is due then (`_site_due`)
            return
        with self._lock:
            for run_dir in due:
                if run_dir not in self._sites_queued:  # one not started yet reads the newest results anyway
                    self._sites_queued.append(run_dir)
                    self._site_queue.put(run_dir)

    def _write_sites(self) -> None:
        """The site writer: one site at a time (`write_site` returns once its build has ended: cli/output.py's
        process, which logs to the run's logs/site.log)."""
        while True:
            run_dir = self._site_queue.get()
            if run_dir is None:
                return
            with self._lock:
                self._sites_queued.remove(run_dir)  # a later job into it queues it again
            try:
                self._write_site(run_dir)
            except Exception:  # noqa: BLE001 - the job's results stand without their pages; the server's log says why
                log.exception("the site of %s could not be written", run_dir)

    def _forget_old(self) -> None:
        """Keep the records of at most `max_finished` finished jobs (their run directories stay on disk)."""
        finished = [j for j in self._jobs.values() if j.finished]
        for job in finished[: max(0, len(finished) - self._max_finished)]:
            del self._jobs[job.id]


@contextlib.contextmanager
def job_log(run_dir: Path) -> Iterator[Path]:
    """The job's log records (this package's, vLLM's) also in its run directory's logs/engine.log, as `run` writes
    them: the server's console stays its own (cli/console.py sends the engine's output to the server's log)."""
    path = run_dir / "logs" / "engine.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(ScrubbingFormatter("%(asctime)s %(processName)s pid=%(process)d %(levelname)s %(name)s: "
                                           "%(message)s"))
    vllm = logging.getLogger("vllm")
    targets = [logging.getLogger()] + ([] if vllm.propagate else [vllm])  # a record reaches the file once
    for target in targets:
        target.addHandler(handler)
    try:
        yield path
    finally:
        for target in targets:
            target.removeHandler(handler)
        handler.close()


def _raise_cancelled() -> None:
    raise JobCancelled()


def _read_summary(run_dir: str | None) -> dict[str, Any] | None:
    """A cancelled job's partial summary, as the job record carries it (None when there is none to read)."""
    from ..results.rundir import read_summary

    if run_dir is None:
        return None
    try:
        return read_summary(Path(run_dir)).to_json()
    except UserError:
        return None
