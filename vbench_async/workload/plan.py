"""The plan of a run, before any engine starts: per benchmark, the frames each video yields, the visual and whole-prompt
tokens of each sample, the largest context, the KV cache and frame cache it needs, and whether it all fits.

Pure functions over the samples, their `FrameSpec`, the video headers (probe.py) and the model's processor rules
(tokens.py): nothing is decoded and no engine is started. The same numbers size the engine (sizing.py) and mark the
samples that cannot fit, so they are recorded as `context_overflow` before generation instead of failing in vLLM.
"""

from __future__ import annotations

import statistics
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ItemsView, Iterator, Mapping, Protocol, Sequence

from ..errors import SampleError
from ..frames.disk_budget import free_disk
from ..frames.keys import cache_key
from ..frames.spec import FrameSpec, frame_range
from .memo import ProcessorMemo
from .probe import HeaderStore, VideoHeader, image_size
from .sizing import EnginePlan, size_engine
from .tokens import ModelLimits, PromptCounter, VideoGeometry

CHUNK = 512  # prompts tokenized per call


class PlanEntry(Protocol):
    """One sample as the run will send it (the run's own entries, `pipeline.PlanEntry`, read as they are): its prompt
    (text or renderer), media paths, and any error already known."""

    @property
    def sample(self) -> Any: ...  # samples.Sample
    @property
    def prompt(self) -> str | Callable[[Any], str]: ...
    @property
    def video(self) -> Path | None: ...
    @property
    def window(self) -> tuple[float | None, float | None] | None: ...
    @property
    def images(self) -> Sequence[Path]: ...
    @property
    def error(self) -> SampleError | None: ...


class PromptTokens(Mapping[str, int]):
    """Sample key -> prompt length, of every planned sample: the ids the samples hold and the lengths in an array,
    where a dict of "benchmark/id" keys made for it took ~150 bytes a sample (15 MB for 100,000 questions)."""

    def __init__(self) -> None:
        self._parts: list[tuple[str, list[str], array[int]]] = []  # (benchmark, sample ids, lengths), in plan order
        self._index: dict[str, int] | None = None  # key -> length, made on the first look-up by key (tests, tools)

    def add(self, sample: Any, n: int) -> None:
        if not self._parts or self._parts[-1][0] != sample.benchmark:
            self._parts.append((sample.benchmark, [], array("q")))
        _, ids, lengths = self._parts[-1]
        ids.append(sample.sample_id)
        lengths.append(n)
        self._index = None

    def pairs(self) -> Iterator[tuple[str, int]]:
        for benchmark, ids, lengths in self._parts:
            for sid, n in zip(ids, lengths):
                yield f"{benchmark}/{sid}", n

    def items(self) -> ItemsView[str, int]:
        return _Pairs(self)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.pairs())

    def __len__(self) -> int:
        return sum(len(ids) for _, ids, _ in self._parts)

    def __getitem__(self, key: str) -> int:
        if self._index is None:
            self._index = dict(self.pairs())
        return self._index[key]


class _Pairs(ItemsView[str, int]):
    """`PromptTokens.items()`: iterated as stored, not by a look-up per key (which would build the index)."""

    _mapping: PromptTokens

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return self._mapping.pairs()


@dataclass
class BenchmarkInput:
    id: str
    spec: FrameSpec
    entries: Sequence[PlanEntry]
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # the card's, for the suggested fix


@dataclass(frozen=True)
class Spread:
    min: int
    median: float
    max: int

    @classmethod
    def of(cls, values: Sequence[int]) -> Spread | None:
        return cls(min(values), statistics.median(values), max(values)) if values else None


@dataclass
class BenchmarkWorkload:
    id: str
    n_samples: int
    n_planned: int  # samples whose prompt length is known exactly
    unplanned: dict[str, int]  # error kind -> samples that will fail before reaching the engine
    frames: Spread | None
    visual_tokens: Spread | None
    prompt_tokens: Spread | None
    largest_context: int  # largest prompt + max_tokens
    largest_item_tokens: int  # largest single video or image, in embeddings
    largest_video: tuple[int, int, int] | None  # (frames, height, width) of the video with most tokens
    cache_entries_to_write: int
    cache_bytes_to_write: int  # as the cache will store them: raw frame bytes times the codec's ratio
    overflow: int = 0  # samples whose prompt does not fit the engine's context
    fix: str | None = None
    unplanned_example: dict[str, str] = field(default_factory=dict)  # error kind -> "sample id: why", its first

    @property
    def fits(self) -> bool:
        return self.overflow == 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fits"] = self.fits
        return d


@dataclass
class WorkloadPlan:
    model: str
    family: str
    max_tokens: int
    benchmarks: list[BenchmarkWorkload]
    engine: EnginePlan
    cache_dir: str
    cache_bytes_to_write: int
    free_disk_bytes: int | None
    not_run: dict[str, str] = field(default_factory=dict)  # benchmark -> why it is not run (data absent)
    cache: CacheEstimate | None = None  # how the bytes to write were estimated, and the cache's warnings
    prompt_tokens: Mapping[str, int] = field(default_factory=PromptTokens, repr=False)  # sample key -> length
    n_done: int = 0  # samples of the selection that already have a result (a resumed run; set by the runner)
    n_to_send: int | None = None  # samples the run will send to the engine (set by the runner; 0: no engine starts)

    @property
    def fits(self) -> bool:
        if self.cache is not None:
            disk = self.cache.fits_disk
        else:
            disk = self.free_disk_bytes is None or self.cache_bytes_to_write <= self.free_disk_bytes
        return disk and self.engine.fits_model and all(b.fits for b in self.benchmarks)

    def overflowing(self) -> dict[str, int]:
        """Sample key -> prompt length, for every sample the engine would refuse (prompt >= its context)."""
        limit = self.engine.max_model_len
        return {k: n for k, n in self.prompt_tokens.items() if n >= limit}

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "family": self.family, "max_tokens": self.max_tokens, "fits": self.fits,
            "engine": self.engine.to_dict(), "cache_dir": self.cache_dir,
            "cache_bytes_to_write": self.cache_bytes_to_write, "free_disk_bytes": self.free_disk_bytes,
            "benchmarks": {b.id: b.to_dict() for b in self.benchmarks}, "not_run": dict(self.not_run),
            "cache": asdict(self.cache) if self.cache is not None else None,
        }


@dataclass(frozen=True)
class CacheEstimate:
    """The frame cache's answer for this plan (frames/budget.check_cache_fit): the codec, the ratio of stored to raw
    bytes it applied and where that ratio came from, and its warnings (over the budget, over the free disk)."""

    codec: str
    ratio: float
    ratio_source: str  # "measured on the cache's entries", "assumed (no <codec> entry cached yet)", or "exact (raw)"
    raw_bytes_to_write: int
    fits_disk: bool
    warnings: list[str]

    def describe(self) -> str:
        return f"{self.codec} at {self.ratio:.2f} of raw ({self.ratio_source})"


def estimate_cache(cache_root: Path, raw_by_key: Mapping[str, int], new_keys: set[str], codec: str | None,
                   max_bytes: int | None) -> tuple[CacheEstimate, int]:
    """(the estimate, the bytes still to write) from the cache's own fit check, so the plan's bytes and warnings are
    the ones the cache will write and warn about."""
    from ..frames.codecs import RAW
    from ..frames.disk_budget import PLANNING_RATIO, PlannedEntry, check_cache_fit

    fit = check_cache_fit(cache_root, [PlannedEntry(raw, key) for key, raw in raw_by_key.items()], max_bytes, codec)
    if fit.codec == RAW:
        source = "exact (raw)"
    elif fit.ratio == PLANNING_RATIO.get(fit.codec):  # check_cache_fit's fallback: nothing of this codec to learn from
        source = f"assumed: no {fit.codec} entry cached yet"
    else:
        source = "measured on the cache's entries"
    raw_new = sum(raw_by_key[k] for k in new_keys)
    return CacheEstimate(codec=fit.codec, ratio=round(fit.ratio, 4), ratio_source=source, raw_bytes_to_write=raw_new,
                         fits_disk=fit.fits_disk, warnings=fit.warnings()), fit.new_bytes


# ----------------------------------------------------------------------------------------------- geometry


def video_geometry(header: VideoHeader, spec: FrameSpec, window: Any, memo: ProcessorMemo | None = None
                   ) -> VideoGeometry:
    """Frames and frame size the cache will produce for this video (decode.py's rules; FrameError as it would).
    Known per (header, spec, window): the questions of one video share it. `memo`: the model's plan memo, which
    keeps the frame indices between plans (computing them imports torch for the Qwen families)."""
    key = (header, spec, window)
    found = _GEOMETRY.get(key)
    if found is None:
        if len(_GEOMETRY) > 65536:  # a long-lived process planning many suites: stay bounded
            _GEOMETRY.clear()
        found = _GEOMETRY[key] = _video_geometry(header, spec, window, memo)
    return found


def _video_geometry(header: VideoHeader, spec: FrameSpec, window: Any, memo: ProcessorMemo | None) -> VideoGeometry:
    first, last, count = frame_range(header.total_frames, header.fps, window)
    n = spec.frame_count(count, header.fps).n
    height, width = spec.frame_size(header.height, header.width, n)
    return VideoGeometry(frames=n, height=height, width=width, indices=tuple(_indices(spec, first, last, n, memo)),
                         fps=header.fps)


_INDICES: dict[tuple[str, int, int, int], list[int]] = {}
_GEOMETRY: dict[tuple[VideoHeader, FrameSpec, Any], VideoGeometry] = {}


def _indices(spec: FrameSpec, first: int, last: int, n: int, memo: ProcessorMemo | None = None) -> list[int]:
    key = (spec.family, first, last, n)  # the family decides the selection rule
    if key not in _INDICES:
        if memo is None:
            _INDICES[key] = spec.indices(first, last, n)
        else:
            _INDICES[key] = memo.answer("indices", f"{spec.family},{first},{last},{n}",
                                        lambda: list(spec.indices(first, last, n)))
    return _INDICES[key]


# ----------------------------------------------------------------------------------------------- the plan


def _counts() -> array[int]:
    return array("q")  # a count per planned sample: 8 bytes each, not a list slot and an int object


@dataclass
class _Tally:
    frames: array[int] = field(default_factory=_counts)
    visual: array[int] = field(default_factory=_counts)
    prompts: array[int] = field(default_factory=_counts)
    unplanned: dict[str, int] = field(default_factory=dict)
    largest_item: int = 0
    largest_video: tuple[int, int, int] | None = None
    largest_video_tokens: int = 0
    worst: tuple[int, PlanEntry | None, VideoHeader | None] = (0, None, None)
    entries: dict[str, int] = field(default_factory=dict)  # cache key -> raw frame bytes, of entries not yet cached
    loads: dict[str, int] = field(default_factory=dict)  # the same for every entry the benchmark loads
    headers: dict[str, VideoHeader] = field(default_factory=dict)  # the chunk in flight: sample key -> its header
    keys: dict[tuple[str, Any], str] = field(default_factory=dict)  # (fingerprint, window) -> cache key
    videos: dict[tuple[Path, Any], tuple[VideoHeader, VideoGeometry]] = field(default_factory=dict)  # (path, window)

    unplanned_example: dict[str, str] = field(default_factory=dict)

    def fail(self, kind: str, sample_id: str, why: str) -> None:
        self.unplanned[kind] = self.unplanned.get(kind, 0) + 1
        self.unplanned_example.setdefault(kind, f"{sample_id}: {why}")


def plan_workload(
    inputs: Sequence[BenchmarkInput],
    counter: PromptCounter,
    limits: ModelLimits,
    headers: HeaderStore,
    *,
    model: str,
    max_tokens: int,
    concurrency: int,
    cache_root: Path,
    entry_path: Callable[[str], Path],
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    not_run: Mapping[str, str] | None = None,
    codec: str | None = None,
    cache_max_bytes: int | None = None,
) -> WorkloadPlan:
    """Plan every benchmark of `inputs`; `max_model_len` given: the user's (it wins over the sized one)."""
    found = headers.headers(e.video for b in inputs for e in b.entries if e.video is not None and e.error is None)
    image_spec = FrameSpec(family=counter.family)  # the run's image loader uses the family's default budget
    prompt_tokens = PromptTokens()
    tallies: list[_Tally] = []
    for bench in inputs:
        tally = _Tally()
        for start in range(0, len(bench.entries), CHUNK):  # one batched tokenizer call per chunk
            chunk = bench.entries[start:start + CHUNK]
            media = [_media(e, bench.spec, counter, found, image_spec, tally, entry_path) for e in chunk]
            ready = [(e, m) for e, m in zip(chunk, media) if m is not None]
            for (entry, (_, videos, _)), count in zip(ready, counter.counts([m for _, m in ready])):
                prompt_tokens.add(entry.sample, _tally(entry, count, videos, counter, tally))
        tallies.append(tally)
    largest = max((max(t.prompts, default=0) for t in tallies), default=0)
    engine = size_engine(
        largest_prompt=largest, largest_item=max((t.largest_item for t in tallies), default=0),
        largest_video=max((t.largest_video for t in tallies if t.largest_video),
                          key=lambda v: v[0] * v[1] * v[2], default=None),
        max_tokens=max_tokens, limits=limits, explicit_max_model_len=max_model_len,
        explicit_batched_tokens=max_num_batched_tokens, concurrency=concurrency)
    loads = {k: v for t in tallies for k, v in t.loads.items()}  # an entry shared by benchmarks: written once
    estimate, to_write = estimate_cache(cache_root, loads, {k for t in tallies for k in t.entries}, codec,
                                        cache_max_bytes)
    benchmarks = [_summarise(b, t, engine, counter, max_tokens, estimate.ratio) for b, t in zip(inputs, tallies)]
    return WorkloadPlan(
        model=model, family=counter.family, max_tokens=max_tokens, benchmarks=benchmarks, engine=engine,
        cache_dir=str(cache_root), cache_bytes_to_write=to_write, free_disk_bytes=free_disk(cache_root),
        not_run=dict(not_run or {}), prompt_tokens=prompt_tokens, cache=estimate)


def _media(entry: PlanEntry, spec: FrameSpec, counter: PromptCounter, found: Mapping[Path, Any],
           image_spec: FrameSpec, tally: _Tally, entry_path: Callable[[str], Path]) -> tuple | None:
    """(prompt, video geometries, image sizes) of one entry, or None when it fails before the engine (a prompt the
    chat template cannot render included)."""
    if entry.error is not None:
        tally.fail(entry.error.kind, entry.sample.sample_id, str(entry.error))
        return None
    videos: list[VideoGeometry] = []
    header = None
    try:
        if entry.video is not None:
            known = tally.videos.get((entry.video, entry.window))  # the questions of one video share it
            if known is None:
                known = _video(entry.video, entry.window, spec, counter, found, tally, entry_path)
            header, geometry = known
            videos.append(geometry)
        images = [image_spec.image_size(*image_size(p)) for p in entry.images]
        prompt = entry.prompt(entry.sample) if callable(entry.prompt) else entry.prompt
        counter.render(prompt, len(videos), len(images))  # its failure is this sample's (counts renders again)
        if videos:
            tally.headers[entry.sample.key] = header
        return prompt, videos, images
    except SampleError as exc:
        tally.fail(exc.kind, entry.sample.sample_id, str(exc))
    except Exception as exc:  # noqa: BLE001 - the run records it (prompt_error and the like); the plan only counts it
        tally.fail("unplanned", entry.sample.sample_id, f"{type(exc).__name__}: {exc}")
    return None


def _video(video: Path, window: Any, spec: FrameSpec, counter: PromptCounter, found: Mapping[Path, Any],
           tally: _Tally, entry_path: Callable[[str], Path]) -> tuple[VideoHeader, VideoGeometry]:
    """The header and geometry of a video (window) the benchmark has not planned yet, its cache entry counted; raises
    the SampleError that stops it (not remembered: each of its questions fails with it)."""
    header = found[video]
    if isinstance(header, SampleError):
        raise header
    geometry = video_geometry(header, spec, window, counter.memo)
    key = tally.keys.get((header.fingerprint, window))
    if key is None:  # the copies of one content share it (hashing per question cost 1 s per 100,000)
        key = tally.keys[header.fingerprint, window] = cache_key(header.fingerprint, spec, window)
    if key not in tally.loads:
        tally.loads[key] = geometry.frames * geometry.height * geometry.width * 3
        if not entry_path(key).exists():
            tally.entries[key] = tally.loads[key]
    tally.videos[video, window] = header, geometry
    return header, geometry


def _tally(entry: PlanEntry, count: Any, videos: list[VideoGeometry], counter: PromptCounter, tally: _Tally) -> int:
    if videos:
        v = videos[0]
        tally.frames.append(v.frames)
        size = counter.video_tokens(v)
        if size > tally.largest_video_tokens:
            tally.largest_video, tally.largest_video_tokens = (v.frames, v.height, v.width), size
    tally.visual.append(count.visual_tokens)
    tally.prompts.append(count.prompt_tokens)
    tally.largest_item = max(tally.largest_item, count.largest_item_tokens)
    if count.prompt_tokens > tally.worst[0]:
        tally.worst = (count.prompt_tokens, entry, tally.headers.get(entry.sample.key))
    tally.headers.pop(entry.sample.key, None)
    return count.prompt_tokens


def _summarise(bench: BenchmarkInput, t: _Tally, engine: EnginePlan, counter: PromptCounter,
               max_tokens: int, cache_ratio: float = 1.0) -> BenchmarkWorkload:
    overflow = sum(1 for n in t.prompts if n >= engine.max_model_len)
    workload = BenchmarkWorkload(
        id=bench.id, n_samples=len(bench.entries), n_planned=len(t.prompts), unplanned=dict(t.unplanned),
        unplanned_example=dict(t.unplanned_example),
        frames=Spread.of(t.frames), visual_tokens=Spread.of(t.visual), prompt_tokens=Spread.of(t.prompts),
        largest_context=max(t.prompts, default=0) + max_tokens if t.prompts else 0,
        largest_item_tokens=t.largest_item, largest_video=t.largest_video,
        cache_entries_to_write=len(t.entries), cache_bytes_to_write=int(sum(t.entries.values()) * cache_ratio),
        overflow=overflow)
    if overflow:
        workload.fix = suggest_fix(bench, t.worst[1], t.worst[2], counter, engine.max_model_len - max_tokens,
                                   can_grow=engine.max_model_len < engine.model_limit)
    return workload


def suggest_fix(bench: BenchmarkInput, worst: PlanEntry | None, header: VideoHeader | None, counter: PromptCounter,
                budget: int, can_grow: bool = True) -> str:
    """What makes the benchmark's longest prompt fit in `budget` tokens: the card's largest preset that does, the
    largest --max-frames and --total-pixels that do, and (`can_grow`: below the model's limit) a longer context."""
    advice = []
    if worst is not None and worst.video is not None and header is not None:
        prompt = worst.prompt(worst.sample) if callable(worst.prompt) else worst.prompt

        def fits(spec: FrameSpec) -> bool:
            try:
                geometry = video_geometry(header, spec, worst.window, counter.memo)
                return counter.count(prompt, [geometry]).prompt_tokens < budget
            except (SampleError, ValueError):
                return False

        frame_keys = FrameSpec.__dataclass_fields__
        presets = sorted(((name, bench.spec.replace(**{k: v for k, v in p.items() if k in frame_keys}))
                          for name, p in bench.presets.items() if isinstance(p, Mapping)),
                         key=lambda item: -(item[1].nframes or item[1].max_frames))
        good = next((f"the preset {bench.id.split('@')[0]}@{name}" for name, s in presets if fits(s)), None)
        if good:
            advice.append(good)
        frames = next((m for m in range(bench.spec.nframes or bench.spec.max_frames, 1, -2)
                       if fits(bench.spec.replace(max_frames=m, nframes=None) if bench.spec.nframes is None
                               else bench.spec.replace(nframes=m))), None)
        if frames:
            advice.append(f"--max-frames {frames}" if bench.spec.nframes is None else f"--nframes {frames}")
        pixels = next((p for p in _halvings(bench.spec.total_pixels) if fits(bench.spec.replace(total_pixels=p))), None)
        if pixels:
            advice.append(f"--total-pixels {pixels}")
    if can_grow:
        advice.append("a larger --max-model-len (up to the model's limit)")
    if not advice:
        return "none found: even the fewest frames leave the prompt longer than the context"
    return ", ".join(advice[:-1]) + (", or " if len(advice) > 1 else "") + advice[-1]


def _halvings(value: int) -> list[int]:
    out = []
    while value > 1 << 16:
        value //= 2
        out.append(value)
    return out
