"""The evaluation loop: loaders stream cached frames into a bounded queue; workers keep N requests in flight.

    groups of samples sharing a video ──► loaders (frames from the cache, or decoded in a worker process on a miss;
        encoded once per group for backends that send bytes) ──► bounded queue ──► N workers: Request ─► backend
        ─► Completion ─► score (a thread) ─► result line (the writer thread: appended, fsynced)

Memory is bounded by the queue size (plus the requests in flight), not by the suite size. Questions on the same video
are queued back to back and share one frame array, so vLLM's prefix cache sees them together. Every sample ends as
exactly one result line: a failure (missing video, engine error on one request) is a result with an error, counted in
the denominator. A dead engine stops the run; finished lines are already on disk.

The event loop only schedules: frame loads, media encoding, scoring and the fsync of each line run in threads, so
a slow disk or a slow scorer never delays a request. A sample counts as done once its line is fsynced, as before.
On Ctrl-C the loop ends without waiting for the loader threads: a decode in flight (up to its timeout) does not hold
the exit; lines already queued for the writer are still written whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from ..backends.base import (
    CONCURRENCY,
    Backend,
    Completion,
    ImageInput,
    Request,
    SamplingParams,
    VideoInput,
    array_uuid,
)
from ..errors import EngineDead, SampleError, UserError
from ..failure_kinds import ENVIRONMENT_KINDS, FailureKind, environment_fault, is_environment_oserror
from ..frames.ablation import ablate
from ..results.lines import InvalidResult
from ..results.manifest import PlannedBenchmark
from ..results.result_file import ResultStore
from ..results.writer import ResultWriter
from ..sample_result import Result
from ..samples import Sample

if TYPE_CHECKING:
    from ..frames.spec import FrameSpec, Window
    from ..frames.video import CachedVideo
    from ..scoring.base import Score

log = logging.getLogger(__name__)


@dataclass(slots=True)
class WorkItem:
    """One sample to evaluate, with everything resolved except its frames (and, usually, its prompt text)."""

    sample: Sample
    # The prompt, or the benchmark's renderer, called when the request is built: a plan of 10,000 questions then
    # holds no prompt text, only samples.
    prompt: str | Callable[[Sample], str]
    store: ResultStore
    error: SampleError | None = None  # known before any work (unsafe path, bad record): recorded as is
    sampling: SamplingParams | None = None  # its benchmark's (a recipe's task max tokens); None: the run's


@dataclass(slots=True)
class PlanEntry(WorkItem):
    """One pending sample of a plan: a work item with its media, the video to load (None without one) and its extra
    images; one object per question."""

    video: Path | None = None
    spec: FrameSpec | None = None  # set with `video`
    window: Window | None = None
    images: tuple[Path, ...] = ()  # a tuple: the empty one is shared by the many entries without images


@dataclass
class BenchmarkPlan(PlannedBenchmark):
    """One benchmark's part of a run: its frame spec, result store, and the entries still to run."""

    entries: list[PlanEntry] = field(default_factory=list)  # pending work
    sample_ids: frozenset[str] | None = None  # the annotation file's samples now: the summary counts only these
    # record_invalid lines of records repaired since -> the id of each one's new line: a failure goes once its
    # record's new result is written (`ResultStore.drop_failures`), never before (an interrupted run keeps it, stale)
    repaired: dict[str, str] = field(default_factory=dict)


@dataclass
class VideoGroup:
    """The samples that share one video (same file, frame spec and window): loaded once, queued together."""

    video: Path | None
    spec: FrameSpec | None
    window: Window | None
    items: list[WorkItem]
    images: dict[str, tuple[Path, ...]] = field(default_factory=dict)  # sample key -> extra images


@dataclass
class LoopStats:
    n_done: int = 0
    n_failed: int = 0
    output_tokens: int = 0
    frame_wait_s: float = 0.0  # loader time spent getting frames (cache hits and misses)
    engine_s: float = 0.0  # sum of request latencies
    starved_gets: int = 0  # a worker found the queue empty
    total_gets: int = 0
    first_request_at: float | None = None
    last_answer_at: float | None = None
    # No request at the engine, between two that were: the engine waited for frames (or for the loop itself).
    engine_idle_s: float = 0.0
    wall_s: float = 0.0
    queued_at_ready: int | None = None  # samples loaded when the engine became ready (None: it already was)
    result_lines: int = 0  # written by the writer thread
    fsyncs: int = 0  # the fsyncs they took (several lines share one when they arrive together)
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def engine_span_s(self) -> float:
        """First request sent to last answer received: the time the engine could have been busy."""
        if self.first_request_at is None or self.last_answer_at is None:
            return 0.0
        return max(self.last_answer_at - self.first_request_at, 0.0)

    @property
    def lines_per_fsync(self) -> float:
        return self.result_lines / self.fsyncs if self.fsyncs else 0.0

    def as_dict(self) -> dict[str, Any]:
        wall = max(self.wall_s, 1e-9)
        return {
            "samples": self.n_done,
            "failed": self.n_failed,
            "loop_wall_s": round(self.wall_s, 3),
            "samples_per_s": round(self.n_done / wall, 3),
            "output_tokens_per_s": round(self.output_tokens / wall, 1),
            "frame_wait_s": round(self.frame_wait_s, 3),
            "engine_s": round(self.engine_s, 3),
            "queue_empty_fraction": round(self.starved_gets / max(self.total_gets, 1), 3),
            "engine_idle_s": round(self.engine_idle_s, 3),
            "engine_idle_fraction": round(self.engine_idle_s / self.engine_span_s, 4) if self.engine_span_s else 0.0,
            "lines_per_fsync": round(self.lines_per_fsync, 2),
            "queued_at_ready": self.queued_at_ready,
            "failures_by_kind": dict(self.failures),
        }


_DONE = object()  # sentinel: no more work
# The pipeline's defaults, declared once (RunConfig's fields default to them): frame-loading threads, and loaded
# samples waiting for a free request slot.
LOADERS = 2
QUEUE_SIZE = 32


class Progress(Protocol):
    """What the loop tells a progress bar (tqdm's methods)."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> Any: ...

    def close(self) -> Any: ...


class Pipeline:
    writer = ResultWriter  # what appends and fsyncs result lines (perf/pipeline.py swaps in the inline one to compare)
    # The one thread that scores answers (`score`, the function, runs in it): off the event loop, in order.
    scoring_pool = staticmethod(lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="score"))

    def __init__(
        self,
        backend: Backend,
        load_video: Callable[[Path, FrameSpec, Window | None], CachedVideo],  # raises SampleError
        load_image: Callable[[Path], np.ndarray],
        score: Callable[[Sample, str], Score],
        sampling: SamplingParams,
        concurrency: int = CONCURRENCY,
        loaders: int = LOADERS,
        queue_size: int = QUEUE_SIZE,
        progress: Progress | None = None,
        ablation: str | None = None,
        system: str | None = None,
    ):
        self.backend = backend
        self.system = system  # every request's system turn (a recipe's); None: none
        self.ablation = ablation  # frames/ablation.py: applied to each video after the cache, before the backend
        self.load_video = load_video
        self.load_image = load_image
        self.score = score
        self.sampling = sampling
        self.concurrency = concurrency
        self.loaders = loaders
        self.queue_size = queue_size
        self.progress = progress
        self.stats = LoopStats()
        self._correct = 0.0
        self._in_flight = 0  # requests at the backend now
        self._idle_since: float | None = None  # when the last one in flight was answered
        self._scoring: ThreadPoolExecutor | None = None
        self._writer: ResultWriter | None = None
        self._ready_at: float | None = None  # when `run`'s `ready` was done
        self._loaded = 0  # samples the loaders have put in the queue

    async def run(self, groups: list[VideoGroup], ready: asyncio.Future[Any] | None = None) -> LoopStats:
        """Evaluate every group. `ready`: the backend's start, still under way; meanwhile the loaders load as many
        samples as the loop holds (those in flight and the queue: frames loaded while the engine starts are frames the
        engine does not wait for), and the requests go when it is done. The loop's wall time counts from then."""
        queue: asyncio.Queue = asyncio.Queue(maxsize=self.queue_size)
        if ready is not None:
            ready.add_done_callback(self._engine_ready)
        pending = iter(groups)
        start = time.perf_counter()
        # Threads (not processes) suffice: cache loads release the GIL in file I/O and numpy copies, and cache misses
        # are decoded in a separate worker process by the frame cache itself (with a timeout).
        pool = ThreadPoolExecutor(max_workers=self.loaders, thread_name_prefix="frames")
        self._scoring = self.scoring_pool()
        try:
            with self.writer() as self._writer:
                async with asyncio.TaskGroup() as tg:
                    loaders = [tg.create_task(self._loader(pending, queue, pool)) for _ in range(self.loaders)]
                    workers = [tg.create_task(self._worker(queue, ready)) for _ in range(self.concurrency)]
                    await asyncio.gather(*loaders)
                    for _ in workers:
                        await queue.put(_DONE)
        except* Exception as group:
            # One fatal error (dead engine, setup problem) stopped the run: raise it as itself, not as a group.
            raise group.exceptions[0] from None
        finally:
            # Never joined: after Ctrl-C or a fatal error a loader may still wait on a decode; nothing it yields is
            # used, and the frame cache's own timeout ends it. (After a normal end every thread is idle already.)
            pool.shutdown(wait=False, cancel_futures=True)
            self._scoring.shutdown(wait=False, cancel_futures=True)
            if self._writer is not None:
                self.stats.result_lines, self.stats.fsyncs = self._writer.lines, self._writer.fsyncs
            self.stats.wall_s = time.perf_counter() - (self._ready_at or start)
        return self.stats

    # -- stages ------------------------------------------------------------------------------------------------------
    async def _loader(self, pending, queue: asyncio.Queue, pool: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        for group in pending:  # a shared iterator: each group goes to exactly one loader
            video_input: VideoInput | None = None
            seen: dict[str, Any] | None = None  # what the model receives, recorded in each result line
            group_error: SampleError | None = None
            if group.video is not None and any(it.error is None for it in group.items):
                t0 = time.perf_counter()
                try:
                    video_input, seen = await loop.run_in_executor(pool, self._video_input, group)
                except SampleError as exc:
                    if exc.kind in ENVIRONMENT_KINDS:  # a full disk, a read-only cache: stop, record nothing
                        raise environment_fault("frame cache", None, str(exc)) from None
                    group_error = exc
                except OSError as exc:
                    if is_environment_oserror(exc):
                        raise environment_fault("frame cache", getattr(exc, "filename", None), exc) from None
                    group_error = SampleError(FailureKind.FRAME_ERROR, f"{type(exc).__name__}: {exc}")  # transient
                except Exception as exc:  # a loader bug must not hang the run: record it against the samples
                    group_error = SampleError(FailureKind.FRAME_ERROR, f"{type(exc).__name__}: {exc}")
                self.stats.frame_wait_s += time.perf_counter() - t0
            for item in group.items:
                if item.error is None and group_error is not None:
                    item.error = group_error
                images: tuple[ImageInput, ...] = ()
                if item.error is None and group.images.get(item.sample.key):
                    try:
                        images = tuple([await loop.run_in_executor(pool, self._image_input, p)
                                        for p in group.images[item.sample.key]])
                    except SampleError as exc:
                        item.error = exc
                    except Exception as exc:  # noqa: BLE001 - an image the loader did not foresee: this sample's
                        item.error = SampleError(FailureKind.IMAGE_ERROR, f"{type(exc).__name__}: {exc}")
                await queue.put((item, video_input, images, seen))
                self._loaded += 1

    def _video_input(self, group: VideoGroup) -> tuple[VideoInput, dict[str, Any]]:
        """The group's frames as the backend sends them (in a loader thread: once per video, not per question), and
        the record of what the model receives that each result line keeps."""
        cached = self.load_video(group.video, group.spec, group.window)
        video = ablate(VideoInput(frames=cached.frames, metadata=cached.hf_metadata(), uuid=cached.key), self.ablation)
        prepare = getattr(self.backend, "prepare_video", None)  # e.g. the OpenAI backend's frame encoding
        seen = dataclasses.replace(cached.seen(group.video), ablation=self.ablation)
        return (prepare(video) if prepare is not None else video), seen.to_dict()

    def _image_input(self, path: Path) -> ImageInput:
        pixels = self.load_image(path)
        image = ImageInput(pixels=pixels, uuid=array_uuid(pixels))
        prepare = getattr(self.backend, "prepare_image", None)
        return prepare(image) if prepare is not None else image

    async def _worker(self, queue: asyncio.Queue, ready: asyncio.Future[Any] | None) -> None:
        while True:
            _stop_if_cancelling()  # also before waiting: a swallowed cancellation is never delivered again
            started = ready is None or ready.done()
            if started:  # how often a free request slot found nothing loaded (not counted while the engine starts)
                self.stats.total_gets += 1
                self.stats.starved_gets += queue.empty()
            entry = await queue.get()
            if entry is _DONE:
                return
            if ready is not None and not started:
                # Each worker takes its first sample while the engine starts and holds it until the engine is ready,
                # so the loaders keep loading meanwhile, up to the samples in flight plus the queue (the loop's own
                # bound): every request can go the moment the engine is ready. Shielded: a worker cancelled by a
                # failed loop leaves the start to its owner.
                await asyncio.shield(ready)
            item, video, images, seen = entry
            await self._evaluate(item, video, images, seen)

    def _engine_ready(self, ready: asyncio.Future[Any]) -> None:
        """When the start is done (before any worker holding a sample resumes): the loop's clock starts, and what the
        loaders had ready by then is recorded."""
        if not ready.cancelled() and ready.exception() is None:
            self._ready_at, self.stats.queued_at_ready = time.perf_counter(), self._loaded  # none sent before

    async def _evaluate(self, item: WorkItem, video: VideoInput | None, images: tuple[ImageInput, ...],
                        seen: dict[str, Any] | None = None) -> None:
        completion: Completion | None = None
        error = item.error
        prompt = ""
        if error is None:
            try:
                prompt = item.prompt(item.sample) if callable(item.prompt) else item.prompt
            except SampleError as exc:  # the record cannot fill the template (unknown task type, bad options)
                error = exc
            except Exception as exc:  # noqa: BLE001 - a template error on one record is that record's failure
                error = SampleError(FailureKind.PROMPT_ERROR, f"{type(exc).__name__}: {exc}")
        if error is None:
            request = Request(
                request_id=f"{item.sample.key}#{item.store.config_hash}",
                prompt=prompt,
                videos=(video,) if video is not None else (),
                images=images,
                sampling=item.sampling or self.sampling,
                system=self.system,
            )
            if self.stats.first_request_at is None:
                self.stats.first_request_at = time.perf_counter()
            _stop_if_cancelling()
            self._sending()
            try:
                completion = await self.backend.generate(request)
            except SampleError as exc:
                error = exc
            except (EngineDead, UserError):
                raise  # fatal (dead engine, setup problem): the TaskGroup cancels everything else and the run stops
            except Exception as exc:  # an exception type the backend did not expect, on one request: that sample's
                log.exception("request %s failed", request.request_id)  # failure, not the whole run's
                error = SampleError(FailureKind.ENGINE_ERROR, f"{type(exc).__name__}: {exc}")
            finally:
                self._answered()
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._scoring, self._result, item, prompt, completion, error, seen)
        try:
            await self._writer.write(item.store, result)
        except InvalidResult as exc:  # a scorer's bad value (a score of 5.0): stored as that sample's failure
            log.error("%s", exc)
            result = await loop.run_in_executor(self._scoring, self._result, item, prompt, completion,
                                                SampleError(FailureKind.RESULT_INVALID, str(exc)), seen)
            await self._writer.write(item.store, result)
        self._count(result, completion)  # after the fsync: a sample counts only once its line is durable

    def _sending(self) -> None:
        now = time.perf_counter()
        if self._in_flight == 0 and self._idle_since is not None:
            self.stats.engine_idle_s += now - self._idle_since
        self._idle_since = None
        self._in_flight += 1

    def _answered(self) -> None:
        self._in_flight -= 1
        self.stats.last_answer_at = time.perf_counter()
        if self._in_flight == 0:
            self._idle_since = self.stats.last_answer_at

    def _result(self, item: WorkItem, prompt: str, completion: Completion | None,
                error: SampleError | None, seen: dict[str, Any] | None = None) -> Result:
        s = item.sample
        result = Result(sample_id=s.sample_id, benchmark=s.benchmark, config_hash=item.store.config_hash,
                        task_type=s.task_type, question=s.question, options=list(s.options), answer=s.answer,
                        video=s.video, fields=dict(s.fields), prompt=prompt, frames=seen)
        if completion is not None:
            result.output = completion.text
            result.prompt_tokens = completion.prompt_tokens
            result.output_tokens = completion.output_tokens
            result.finish_reason = completion.finish_reason
            result.latency_s = round(completion.latency_s, 4)
            try:
                sc = self.score(s, completion.text)
                result.score, result.extracted, result.well_formed = sc.value, sc.extracted, sc.well_formed
                result.details = dict(sc.details)
                result.official = sc.official.to_dict() if sc.official is not None else None
                result.robust = sc.robust.to_dict() if sc.robust is not None else None
            except SampleError as exc:  # unparsable ground truth (scoring.score's contract): the record is at fault
                error = exc
            except ValueError as exc:  # unknown task type
                error = SampleError(FailureKind.RECORD_INVALID, str(exc))
            except Exception as exc:  # noqa: BLE001 - a scorer bug on one answer must not stop the run
                log.exception("scoring %s failed", s.key)
                error = SampleError(FailureKind.SCORE_ERROR, f"{type(exc).__name__}: {exc}")
        if error is not None:
            result.error = {"kind": error.kind, "message": str(error)}
            result.score = None
        return result

    def _count(self, result: Result, completion: Completion | None) -> None:
        st = self.stats
        st.n_done += 1
        if completion is not None:
            st.output_tokens += completion.output_tokens
            st.engine_s += completion.latency_s
        if result.error:
            st.n_failed += 1
            kind = result.error["kind"]
            st.failures[kind] = st.failures.get(kind, 0) + 1
        else:
            self._correct += result.score or 0.0
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix_str(f"mean={self._correct / st.n_done:.3f} failed={st.n_failed}", refresh=False)


def _stop_if_cancelling() -> None:
    """Raise CancelledError if this task is being cancelled (Ctrl-C): no request may start after the signal."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


def group_by_video(entries: list[PlanEntry]) -> list[VideoGroup]:
    """Group work items by (video, spec, window), keeping first-seen order so runs are deterministic."""
    groups: dict[tuple[str, FrameSpec | None, Window | None], VideoGroup] = {}
    for e in entries:
        key = (str(e.video) if e.video is not None else f"novideo:{e.sample.key}", e.spec, e.window)
        group = groups.get(key)
        if group is None:
            group = groups[key] = VideoGroup(video=e.video, spec=e.spec, window=e.window, items=[])
        group.items.append(e)
        if e.images:
            group.images[e.sample.key] = e.images
    return list(groups.values())
