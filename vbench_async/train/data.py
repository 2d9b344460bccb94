"""Training data: unified-format records -> `TrainItem`s, their order (resumable), and their media.

Records go through the same adapters as evaluation: a benchmark card (`data.benchmark`) or a plain unified JSON/JSONL
file (`data.records`). Frames come from the shared frame cache, filled once before the first step, so nothing is
decoded at train time; `frame_source: decode` decodes on every use instead (the baseline of perf/train_step.py).
Images have their own pixel budget (`image_min_pixels` / `image_max_pixels`), independent of the video budget.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from ..backends.base import ImageInput, Request, SamplingParams, VideoInput, array_uuid
from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..samples import Sample
from .config import DataConfig

if TYPE_CHECKING:
    from ..frames.spec import FrameSpec
    from ..models import ModelRef
    from .headers import Headers, HeaderSource

log = logging.getLogger(__name__)

# The predecessor's offline-trajectory fields, accepted next to `data.offline_field`.
_LEGACY_OFFLINE = ("offline_output", "has_offline_trajectory")


@dataclass(frozen=True)
class TrainItem:
    """One training prompt: the sample (for its reward), the rendered prompt text and resolved media paths."""

    index: int  # position in the dataset
    sample: Sample
    prompt: str
    video: Path | None = None
    window: tuple[float | None, float | None] | None = None
    images: tuple[Path, ...] = ()
    offline: tuple[str, ...] = ()  # offline responses (e.g. from a stronger model) for hybrid groups

    @property
    def modality(self) -> str:
        kinds = (["video"] if self.video else []) + (["image"] if self.images else [])
        return "+".join(kinds) or "text"


# ------------------------------------------------------------------------------------------------ loading


def load_items(cfg: DataConfig) -> list[TrainItem]:
    """All valid training items. Invalid records are skipped with a warning; none valid is a UserError."""
    if cfg.benchmark:
        items, skipped = _from_benchmark(cfg)
    else:
        items, skipped = _from_records(cfg)
    if skipped:
        log.warning("skipped %d invalid record(s); first: %s", len(skipped), skipped[0])
    if cfg.max_samples is not None:
        items = items[: cfg.max_samples]
    if not items:
        raise UserError(f"no usable training records in {cfg.benchmark or cfg.records}"
                        + (f" ({len(skipped)} invalid; first: {skipped[0]})" if skipped else ""))
    return [dataclasses.replace(it, index=i) for i, it in enumerate(items)]


def _from_benchmark(cfg: DataConfig) -> tuple[list[TrainItem], list[str]]:
    from ..benchmarks import get_benchmark

    bench = get_benchmark(cfg.benchmark)
    items, skipped = [], []
    for s in bench.load_samples(cfg.data_root):
        if isinstance(s, SampleError):
            skipped.append(f"{s.sample_id}: {s}")
            continue
        try:
            _check(s)
            video = bench.video_path(s, cfg.data_root) if s.video else None
            images = tuple(bench.image_paths(s, cfg.data_root)) if s.images else ()
            items.append(TrainItem(0, s, bench.render_prompt(s), video, s.window if video else None, images,
                                   offline_texts(s, cfg.offline_field)))
        except SampleError as exc:
            skipped.append(f"{s.sample_id}: {exc}")
    return items, skipped


def _from_records(cfg: DataConfig) -> tuple[list[TrainItem], list[str]]:
    from ..benchmarks.registry import safe_join
    from ..legacy_records import convert_record, is_legacy
    from ..samples import read_records, sample_from

    path = Path(cfg.records).expanduser()
    if not path.is_file():
        raise UserError(f"data.records: no such file {path}")
    root = Path(cfg.video_dir).expanduser() if cfg.video_dir else path.parent
    try:
        records = read_records(path)
    except SampleError as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    items, skipped = [], []
    for i, rec in enumerate(records):
        try:  # the predecessor's training layout (answer / videos / images) is read as it is
            rec = convert_record(rec, i) if is_legacy(rec) else rec
        except SampleError as exc:
            skipped.append(f"#{i}: {exc}")
            continue
        s = sample_from(rec, path.stem, i)
        if isinstance(s, SampleError):
            skipped.append(f"{s.sample_id}: {s}")
            continue
        try:
            _check(s)
            video = safe_join(root, s.video, False, "video") if s.video else None
            images = tuple(safe_join(root, im, False, "image") for im in s.images)
            items.append(TrainItem(0, s, render(s, cfg.prompt_template), video, s.window if video else None,
                                   images, offline_texts(s, cfg.offline_field)))
        except SampleError as exc:
            skipped.append(f"{s.sample_id}: {exc}")
    return items, skipped


def _check(sample: Sample) -> None:
    """Reject a record whose reward cannot be computed (unknown task type, unreadable ground truth) up front."""
    from ..scoring import UnknownTaskType, check_sample

    try:
        check_sample(sample)
    except UnknownTaskType as exc:
        raise SampleError(FailureKind.RECORD_INVALID, str(exc)) from exc


def render(sample: Sample, template: str | Mapping[str, str] | None) -> str:
    """Prompt text of a records-mode sample: a named template (one, or per task type), else question + options."""
    from ..benchmarks import prompts
    from ..benchmarks.cards import template_of
    from ..scoring.task_types import canonical_or_given

    if isinstance(template, Mapping):
        template = template_of(template, sample.task_type, canonical_or_given(sample.task_type))
    if template:
        try:
            return prompts.render(template, sample)
        except UserError as exc:
            raise UserError(f"data.prompt_template: {exc}") from exc
    return "\n".join([sample.question, *sample.options])


def offline_texts(sample: Sample, field: str) -> tuple[str, ...]:
    """Offline responses of a record: `field` as a string or list of strings, or the predecessor's fields."""
    value: Any = sample.fields.get(field)
    if value is None and sample.fields.get(_LEGACY_OFFLINE[1]):
        value = sample.fields.get(_LEGACY_OFFLINE[0])
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v)
    raise SampleError(FailureKind.RECORD_INVALID,
                      f"{field} must be a string or a list of strings, got {type(value).__name__}")


# ------------------------------------------------------------------------------------------------ order


@dataclass
class DataOrder:
    """An endless stream of dataset indices: one permutation per epoch, fixed by (seed, epoch).

    The only state is how many prompts were consumed, so a resumed run sees exactly the same order.
    """

    size: int
    seed: int
    shuffle: bool = True
    consumed: int = 0

    def _epoch(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.size)
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def take(self, count: int) -> list[int]:
        """The next `count` indices of the stream (crossing epoch boundaries as needed)."""
        out: list[int] = []
        pos = self.consumed
        while len(out) < count:
            epoch, offset = divmod(pos, self.size)
            perm = self._epoch(epoch)
            chunk = perm[offset: offset + count - len(out)]
            out.extend(int(i) for i in chunk)
            pos += len(chunk)
        self.consumed = pos
        return out


def rank_slice(indices: list[int], rank: int, world: int) -> list[int]:
    """This rank's contiguous share of a global batch (the batch size is a multiple of the world size)."""
    if len(indices) % world:
        raise UserError(f"a global batch of {len(indices)} prompts does not split over {world} ranks; make "
                        "train.prompts_per_step a multiple of the number of processes")
    per = len(indices) // world
    return indices[rank * per: (rank + 1) * per]


# ------------------------------------------------------------------------------------------------ media


class MediaSource:
    """Frames and images of items, as the backends' `VideoInput` / `ImageInput` (the evaluation contract)."""

    def __init__(self, spec: Any, frame_source: str = "cache", cache_dir: str | None = None, workers: int = 2,
                 headers: Callable[[Path], HeaderSource] | None = None, ablation: str | None = None):
        """`headers`: the video headers the split by cost reads, from the cache's folder (default: this process's
        own, kept under the cache; the trainer's are read by rank 0 and shared, headers.py). `ablation`
        (`data.ablation`): applied to every video after the cache, as the evaluation's loader does."""
        from ..frames import FrameCache
        from ..frames.ablation import check
        from .headers import HeaderFile

        check(ablation)
        self.spec = spec  # frames.FrameSpec
        self.ablation = ablation
        self.frame_source = frame_source
        self.workers = workers
        self.cache = FrameCache(Path(cache_dir)) if cache_dir else FrameCache.default()
        self.headers = (headers or (lambda root: HeaderFile(root, "default").headers))(self.cache.root)
        self.decoded = 0  # videos decoded during training (cache misses, or every video in decode mode)
        self._owners: dict[tuple[Any, int], list[int]] = {}  # the last split computed (prepare, then uncached)

    def _share(self, items: list[TrainItem], rank: int, world: int) -> set[tuple[str, Any]]:
        """This rank's videos (with windows) to prepare: a split by decoding cost, the same on every rank."""
        jobs = sorted({(str(it.video), it.window) for it in items if it.video}, key=str)
        if world == 1:
            return set(jobs)
        key = (tuple(jobs), world)
        if key not in self._owners:
            self._owners = {key: split_by_cost(jobs, world, self.headers([video for video, _ in jobs]))}
        return {job for job, owner in zip(jobs, self._owners[key]) if owner == rank}

    def prepare(self, items: list[TrainItem], rank: int = 0, world: int = 1, progress: bool = False) -> Any:
        """Fill the cache with share `rank` of `world` of the videos (the other shares are other ranks' work).
        Returns the report (None in decode mode)."""
        from ..frames import VideoJob, preprocess

        if self.frame_source != "cache":
            return None
        mine = [VideoJob(Path(v), self.spec, w) for v, w in sorted(self._share(items, rank, world), key=str)]
        report = preprocess(mine, self.cache, workers=self.workers, progress=progress)
        for failure in report.failures:
            log.warning("cannot cache %s: %s", failure.video, failure.message)
        return report

    def uncached(self, items: list[TrainItem], rank: int = 0, world: int = 1) -> list[int]:
        """Positions of the items of this share whose frames are not in the cache after `prepare`."""
        share = self._share(items, rank, world)
        return [i for i, it in enumerate(items) if it.video and (str(it.video), it.window) in share
                and not self.cache.has(it.video, self.spec, it.window)]

    def why_uncached(self, item: TrainItem) -> str:
        """The recorded reason an item's video could not be cached (as far as this process can tell)."""
        from ..frames import FrameError

        failure = self.cache.failure(item.video, self.spec, item.window)
        if failure is not None:
            return f"{failure.kind}: {failure.message}"
        try:
            self.cache.key(item.video, self.spec, item.window)
        except FrameError as exc:
            return f"{exc.kind}: {exc}"
        return "not cached (the rank that prepared it logged why)"

    def video(self, item: TrainItem) -> VideoInput:
        from ..frames.ablation import ablate
        from ..frames.decode_video import decode_video
        from ..frames.video import CachedVideo

        if self.frame_source == "cache":
            cached = self.cache.get(item.video, self.spec, item.window)
            if cached is None:
                self.decoded += 1
                cached = self.cache.get_or_decode(item.video, self.spec, item.window)
        else:
            frames, meta = decode_video(item.video, self.spec, item.window, self.cache.decoder)
            self.decoded += 1
            cached = CachedVideo(key=f"live:{item.video}", frames=frames, meta=meta)
        return ablate(VideoInput(frames=cached.frames, metadata=cached.hf_metadata(), uuid=cached.key), self.ablation)

    def images(self, item: TrainItem) -> tuple[ImageInput, ...]:
        from ..frames import load_image

        out = []
        for path in item.images:
            pixels = load_image(path, self.spec)
            out.append(ImageInput(pixels=pixels, uuid=array_uuid(pixels)))
        return tuple(out)

    def request(self, item: TrainItem, sampling: SamplingParams, n: int, request_id: str) -> Request:
        """The rollout request of an item: the same `Request` the evaluation pipeline sends."""
        videos = (self.video(item),) if item.video else ()
        return Request(request_id=request_id, prompt=item.prompt, videos=videos, images=self.images(item),
                       sampling=sampling, n=n)

    def close(self) -> None:
        self.cache.close()


def split_by_cost(jobs: list[tuple[str, Any]], world: int, probes: Headers) -> list[int]:
    """The rank that prepares each (video, window): the frames its decoder reads through (the window's span in the
    container header, from `probes`; the median of the known ones where a header cannot be read), longest first onto
    the least-loaded rank (`sharding.balance`). A split by count gave one rank all the long videos."""
    from ..frames.errors import FrameError
    from ..frames.spec import frame_range, normalize_window
    from ..sharding import balance

    spans: list[int | None] = []
    for video, window in jobs:
        probe = probes.get(video)
        span = None
        if probe is not None:
            try:
                span = frame_range(probe.total_frames, probe.fps, normalize_window(window))[2]
            except FrameError:  # a window outside the video: it fails fast when prepared
                span = 1
        spans.append(span)
    known = sorted(s for s in spans if s is not None)
    fallback = known[len(known) // 2] if known else 1
    names = [f"{i:09d}" for i in range(len(jobs))]  # balance breaks ties by name: keep the sorted order
    owner = balance({n: max(1, s if s is not None else fallback) for n, s in zip(names, spans)}, world)
    return [owner[n] for n in names]


def frame_spec(cfg: DataConfig, model: ModelRef) -> FrameSpec:
    """The frames a rollout sees, resolved as an evaluation of `model` resolves them (`resolve_frame_spec`): the
    card's (in benchmark mode), then the checkpoint's (a fixed-side family's side), then `data.frames`."""
    from ..frames.spec import resolve_frame_spec

    if cfg.benchmark:
        from ..benchmarks import get_benchmark

        return get_benchmark(cfg.benchmark).frame_spec(model, cfg.frames)
    return resolve_frame_spec(model.family, {}, dict(model.frame_settings), cfg.frames, "data.frames")
