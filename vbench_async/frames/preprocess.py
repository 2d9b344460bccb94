"""`preprocess`: fill the cache for many videos, once each, with a bounded number of decode workers."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from ..failure_kinds import ENVIRONMENT_KINDS, environment_fault, is_environment_oserror
from .cache import DECODED, DEFERRED, FrameCache
from .errors import FrameError
from .labels import record_labels
from .spec import FrameSpec, Window


@dataclass(frozen=True)
class VideoJob:
    video: Path
    spec: FrameSpec
    window: Window | None = None
    benchmark: str | None = None  # for `cache stats` by benchmark


@dataclass(frozen=True)
class VideoFailure:
    video: str
    kind: str
    message: str
    jobs: int  # how many jobs (samples) needed this video


@dataclass
class PreprocessReport:
    jobs: int = 0
    unique: int = 0  # distinct cache keys (plus distinct unreadable paths)
    cached: int = 0  # decoded and stored by this call
    reused: int = 0  # already in the cache
    deferred: int = 0  # not warmed: the cache budget is taken by entries queued requests need (decoded on demand)
    failed: int = 0
    passes: int = 0  # decode passes run: one per video and window, however many specs (budgets) it filled
    seconds: float = 0.0
    failures: list[VideoFailure] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        rate = f", {self.cached / self.seconds:.2f} videos/s decoded" if self.cached and self.seconds else ""
        deferred = f", {self.deferred} deferred (cache budget)" if self.deferred else ""
        return (
            f"{self.jobs} jobs, {self.unique} unique videos: {self.cached} cached, {self.reused} reused, "
            f"{self.failed} failed{deferred} in {self.seconds:.1f} s{rate}"
        )


WORKERS = 2  # decoder processes at once, unless told otherwise (RunConfig.decode_workers): declared once


def preprocess(
    jobs: Iterable[VideoJob],
    cache: FrameCache,
    workers: int = WORKERS,
    retry_failed: bool = False,
    progress: bool = True,
    stop: threading.Event | None = None,
) -> PreprocessReport:
    """Decode every distinct (video content, spec, window) not yet cached. Failures are reported, never raised.

    Setting `stop` (Ctrl-C, when this runs in a thread) ends it after the decodes in flight."""
    started = time.perf_counter()
    report = PreprocessReport()
    todo: dict[str, tuple[VideoJob, int]] = {}  # key -> (first job, number of jobs)
    bad_paths: dict[tuple[str, str], tuple[FrameError, int]] = {}
    labels: dict[str, set[str]] = {}  # a set: one key per question would be a list of 100,000 new strings
    for job in jobs:
        report.jobs += 1
        try:
            key = cache.key(job.video, job.spec, job.window)
        except FrameError as exc:  # missing or empty file: nothing to decode, nothing to key on
            error, count = bad_paths.get((str(job.video), exc.kind), (exc, 0))
            bad_paths[(str(job.video), exc.kind)] = (error, count + 1)
            continue
        first, count = todo.get(key, (job, 0))
        todo[key] = (first, count + 1)
        if job.benchmark:
            labels.setdefault(job.benchmark, set()).add(key)
    for benchmark, keys in labels.items():
        record_labels(cache.layout, benchmark, keys)
    report.unique = len(todo) + len(bad_paths)
    for (video, kind), (error, count) in bad_paths.items():
        report.failures.append(VideoFailure(video, kind, str(error), count))

    cache.set_max_workers(workers)
    # The specs wanted of one video and window (a frame-budget sweep's budgets) come from one decode pass.
    by_video: dict[tuple[str, Window | None], list[tuple[VideoJob, int]]] = {}
    for job, count in todo.values():
        by_video.setdefault((str(job.video), job.window), []).append((job, count))
    bar = _progress_bar(len(todo), progress)
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="preprocess")

    def ensure(group: list[tuple[VideoJob, int]]) -> list[str]:
        first = group[0][0]
        if len(group) == 1:
            return [cache.ensure(first.video, first.spec, first.window, retry_failed=retry_failed)]
        return cache.ensure_specs(first.video, [j.spec for j, _ in group], first.window, retry_failed=retry_failed)

    try:
        futures = {pool.submit(ensure, group): group for group in by_video.values()}
        for future in as_completed(futures):
            if stop is not None and stop.is_set():
                break
            group = futures[future]
            try:
                outcomes = future.result()
                report.passes += DECODED in outcomes
                for outcome in outcomes:
                    if outcome == DECODED:
                        report.cached += 1
                    elif outcome == DEFERRED:
                        report.deferred += 1
                    else:
                        report.reused += 1
            except OSError as exc:
                if not is_environment_oserror(exc):
                    raise
                raise environment_fault("frame cache", cache.root, exc) from None
            except FrameError as exc:
                if exc.kind in ENVIRONMENT_KINDS:  # every other video would fail the same way: stop now
                    raise environment_fault("frame cache", cache.root, str(exc)) from None
                report.failures.extend(VideoFailure(str(job.video), exc.kind, str(exc), count) for job, count in group)
            if bar is not None:
                bar.update(len(group))
                bar.set_postfix(cached=report.cached, reused=report.reused, failed=len(report.failures))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on Ctrl-C: only the decodes already running finish
        if bar is not None:
            bar.close()
    report.failed = len(report.failures)
    report.seconds = time.perf_counter() - started
    return report


def _progress_bar(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="video", desc="preprocess", file=sys.stderr, dynamic_ncols=True)
