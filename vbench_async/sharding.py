"""Split a run into N shards of about equal cost, the same way in every process, each video's questions together.

A shard's cost is the number of frames its samples send to the model: frames x questions per video. Frame counts
come from each benchmark's `FrameSpec` and, where the container header can be read (PyAV reads the header only, no
decoding), the video's frame count and rate; otherwise the spec's frame cap stands in, so the split degrades to
balancing question counts. Videos go largest first to the least-loaded shard (LPT; ties by name), which keeps the
largest shard within a few per cent of the mean once there are a few videos per shard.

All questions on one video file (across benchmarks and windows) form one unit and land in one shard, so the frame
cache and vLLM's prefix cache are reused inside the shard. Units are keyed by the annotation's video path, not the
absolute path, so nodes that mount the data at different places still agree.

Every shard computes the split itself; the first one to finish planning pins it in `OUTPUT_DIR/shards/plan-*.json`
(create-once through a hard link, atomic on local disks and NFS) and later shards and resumed runs use the pinned
plan, so a header that one node could not read never makes two shards disagree.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence, TypeVar

from .errors import SampleError, UserError
from .record_io import RecordError
from .results.result_config import ResultConfig
from .results.rundir import PLAN_DIRNAME, shard_index_path, shard_tag
from .results.shard_records import PLAN_FORMAT, PlanFile, ShardIndex

if TYPE_CHECKING:
    from .benchmarks.registry import Benchmark
    from .frames.spec import FrameSpec, Window
    from .samples import Sample

    Loaded = tuple[Benchmark, FrameSpec, list[Sample | SampleError]]  # a benchmark, its frame spec, its samples

log = logging.getLogger(__name__)

SampleT = TypeVar("SampleT")  # a Sample, or the SampleError of a malformed record (both have `sample_id`)

PROBE_THREADS = 8  # header reads are I/O bound (a shared filesystem's latency), not CPU bound


class Shard(NamedTuple):
    """Shard `index` (from 0) of `count`. A tuple, so `RunConfig.shard` may also be a plain `(index, count)`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """"K/N" with 0 <= K < N, e.g. "0/4" ... "3/4"."""
        index, sep, count = str(text).strip().partition("/")
        try:
            shard = cls(int(index), int(count)) if sep else None
        except ValueError:
            shard = None
        if shard is None:
            raise UserError(f"a shard is K/N (shard K of N, counting from 0, e.g. 0/4), not {text!r}")
        return shard.checked()

    def checked(self) -> Shard:
        if self.count < 1 or not 0 <= self.index < self.count:
            one_based = (f"; shards count from 0 (0/{self.count} ... {self.count - 1}/{self.count}): from a Slurm "
                         f"array numbered from 1 (--array=1-{self.count}) pass --shard auto (it reads "
                         "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_MIN) or --shard "
                         f"$((SLURM_ARRAY_TASK_ID-1))/{self.count}") if self.index == self.count >= 1 else ""
            raise UserError(f"shard {self.index}/{self.count} does not exist: K/N needs 0 <= K < N{one_based}")
        return self

    @property
    def tag(self) -> str:
        """File-name part: "shard-0-of-4"."""
        return shard_tag(self)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class ShardItem:
    """One sample as the splitter sees it."""

    benchmark: str
    sample_id: str
    group: str  # unit key: "video:<annotation path>", or the sample itself when it has no (usable) video
    video: Path | None = None  # the file to probe
    spec: FrameSpec | None = None
    window: Window | None = None


class VideoProbe(NamedTuple):
    fps: float
    total_frames: int


def items_for(benchmark: Benchmark, samples: Sequence[Sample | SampleError], spec: FrameSpec,
              data_root: Path | None, allow_outside: bool = False) -> list[ShardItem]:
    """The splitter's view of one benchmark's samples (Sample or SampleError, as `load_samples` returns them)."""
    out = []
    for s in samples:
        if isinstance(s, SampleError):
            out.append(ShardItem(benchmark.id, str(s.sample_id), f"sample:{benchmark.id}/{s.sample_id}"))
            continue
        if not s.video:
            out.append(ShardItem(benchmark.id, s.sample_id, f"sample:{s.key}"))
            continue
        try:
            path = benchmark.video_path(s, data_root, allow_outside=allow_outside)
        except SampleError:  # unsafe path: the run records the failure; it still belongs to its video's unit
            path = None
        out.append(ShardItem(benchmark.id, s.sample_id, f"video:{s.video}", path, spec, s.window))
    return out


# -- cost ------------------------------------------------------------------------------------------------------------
def probe_video(path: Path) -> VideoProbe | None:
    """Frame rate and frame count from the container header, or None when it cannot be read cheaply."""
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            fps = float(rate) if rate else 0.0
            frames = int(stream.frames or 0)
            if not frames and fps > 0:
                if stream.duration and stream.time_base:
                    seconds = float(stream.duration * stream.time_base)
                else:
                    seconds = (container.duration or 0) / 1e6  # av.time_base units
                frames = round(seconds * fps)
    except Exception:  # missing, unreadable or not a video: the run reports it; here it only costs an estimate
        return None
    return VideoProbe(fps, frames) if fps > 0 and frames > 0 else None


def estimate_frames(spec: FrameSpec, probe: VideoProbe | None, window: Window | None = None) -> int:
    """Frames the spec will take from this video; the spec's cap when the video's length is unknown."""
    from .frames.errors import FrameError
    from .frames.spec import frame_range, normalize_window

    if spec is None:
        return 0
    if probe is not None:
        try:
            _, _, count = frame_range(probe.total_frames, probe.fps, normalize_window(window))
            return spec.frame_count(count, probe.fps).n
        except FrameError:  # a window outside the video: the run reports it
            pass
    return spec.nframes or spec.max_frames


def probe_all(paths: Iterable[Path], threads: int = PROBE_THREADS) -> dict[Path, VideoProbe | None]:
    unique = sorted(set(paths), key=str)
    if not unique:
        return {}
    with ThreadPoolExecutor(max_workers=min(threads, len(unique)), thread_name_prefix="probe") as pool:
        return dict(zip(unique, pool.map(probe_video, unique)))


def unit_costs(items: Sequence[ShardItem], probes: dict[Path, VideoProbe | None]) -> dict[str, int]:
    """Cost per unit: the sum of its samples' frame counts (at least 1 per sample, for text-only ones)."""
    costs: dict[str, int] = defaultdict(int)
    for it in items:
        probe = probes.get(it.video) if it.video is not None else None
        costs[it.group] += max(1, estimate_frames(it.spec, probe, it.window))
    return dict(costs)


def balance(costs: dict[str, int], count: int) -> dict[str, int]:
    """Unit -> shard: largest first onto the least-loaded shard (ties: lower shard index, then unit name)."""
    heap = [(0, shard) for shard in range(count)]
    owner: dict[str, int] = {}
    for key in sorted(costs, key=lambda k: (-costs[k], k)):
        load, shard = heapq.heappop(heap)
        owner[key] = shard
        heapq.heappush(heap, (load + costs[key], shard))
    return owner


def loads(costs: dict[str, int], owner: dict[str, int], count: int) -> list[int]:
    out = [0] * count
    for key, shard in owner.items():
        out[shard] += costs[key]
    return out


# -- the plan --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardPlan:
    count: int
    owner: dict[str, int]  # unit key -> shard
    costs: dict[str, int]  # unit key -> estimated cost
    key: str = ""
    estimate: dict[str, Any] | None = None  # how the costs were obtained (videos probed, seconds)

    @property
    def loads(self) -> list[int]:
        return loads(self.costs, self.owner, self.count)

    def to_json(self) -> str:
        record = PlanFile(format=PLAN_FORMAT, key=self.key, count=self.count, loads=self.loads, estimate=self.estimate,
                          units={k: [self.owner[k], self.costs[k]] for k in sorted(self.owner)})
        return json.dumps(record.to_json(), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "shard plan") -> ShardPlan:
        """The plan of a plan file's text; RecordError naming `where` when it is not a plan of this format."""
        record = PlanFile.from_json(json.loads(text), where)
        if record.format != PLAN_FORMAT:
            raise RecordError(f"{where}: shard plan format {record.format!r}, this version reads {PLAN_FORMAT}")
        if any(len(unit) != 2 for unit in record.units.values()):
            raise RecordError(f"{where}: a unit is not [shard, cost]")
        return cls(record.count, {k: v[0] for k, v in record.units.items()}, {k: v[1] for k, v in record.units.items()},
                   record.key, record.estimate)


def plan_key(items: Sequence[ShardItem], count: int) -> str:
    """Identity of a split: the shard count and every sample with its unit, frame settings and window. Costs are
    left out on purpose: processes that estimate differently still find (and use) the same pinned plan."""
    digest = hashlib.blake2b(digest_size=10)
    digest.update(f"{PLAN_FORMAT}:{count}".encode())
    for it in sorted(items, key=lambda i: (i.group, i.benchmark, i.sample_id)):
        spec = it.spec.key_fields() if it.spec is not None else None
        digest.update(json.dumps([it.group, it.benchmark, it.sample_id, spec, it.window]).encode())
    return digest.hexdigest()


def make_plan(items: Sequence[ShardItem], count: int, probe: bool = True) -> ShardPlan:
    """Compute the split (probing video headers unless `probe` is False)."""
    started = time.perf_counter()
    paths = [it.video for it in items if it.video is not None and it.spec is not None]
    probes = probe_all(paths) if probe else {}
    costs = unit_costs(items, probes)
    estimate = {"videos": len(set(paths)), "probed": sum(p is not None for p in probes.values()),
                "seconds": round(time.perf_counter() - started, 3)}
    return ShardPlan(count, balance(costs, count), costs, plan_key(items, count), estimate)


def pinned_plan(run_dir: Path, items: Sequence[ShardItem], count: int) -> ShardPlan:
    """The run's split: the one already pinned under run_dir/shards/ for these samples, else a new one, pinned."""
    key = plan_key(items, count)
    path = Path(run_dir) / PLAN_DIRNAME / f"plan-{key}.json"
    if not path.exists():
        plan = make_plan(items, count)
        log.info("shard plan %s: %d units over %d shards, estimated loads %s (%s)", path.name, len(plan.owner),
                 count, plan.loads, plan.estimate)
        publish_once(path, plan.to_json())
    try:
        plan = ShardPlan.from_json(read_published(path), str(path))
    except RecordError as exc:
        raise RecordError(f"{exc}; remove it to plan again") from exc
    groups = {it.group for it in items}
    if set(plan.owner) != groups or plan.count != count:
        raise UserError(f"{path} does not match this run's samples (edited by hand?); remove it to plan again")
    return plan


# -- what one shard keeps --------------------------------------------------------------------------------------------
@dataclass
class ShardSelection:
    """This process's shard of a run: which samples it evaluates, and the per-benchmark index `merge` checks."""

    shard: Shard
    plan: ShardPlan
    groups: dict[tuple[str, str], str]  # (benchmark, sample id) -> unit key

    def owner(self, benchmark: str, sample_id: str) -> int:
        return self.plan.owner[self.groups[(benchmark, sample_id)]]

    def keep(self, benchmark: str, samples: Sequence[SampleT]) -> list[SampleT]:
        """The samples of this shard, in their original order."""
        return [s for s in samples if self.owner(benchmark, str(s.sample_id)) == self.shard.index]

    def write_index(self, run_dir: Path, benchmark: str, config_hash: str, config: ResultConfig,
                    sample_ids: Sequence[str]) -> Path:
        """Record every sample of the benchmark with its shard (identical in all shards; the first write wins).
        Refuses when another shard already recorded a different sample list: the shards were not started alike."""
        path = shard_index_path(Path(run_dir), benchmark, config_hash, self.shard.count)
        ids = [str(i) for i in sample_ids]
        owners = [self.owner(benchmark, i) for i in ids]
        record = ShardIndex(format=PLAN_FORMAT, benchmark=benchmark, config_hash=config_hash, count=self.shard.count,
                            plan=self.plan.key, config=config, sample_ids=ids, shards=owners)
        written = publish_once(path, json.dumps(record.to_json(), default=str) + "\n")
        try:
            existing = ShardIndex.from_json(json.loads(written), str(path))
        except RecordError as exc:
            raise RecordError(f"{exc}; remove it and start the shards again") from exc
        if not existing.same_split(record):
            raise UserError(
                f"{path} lists another split of {benchmark} ({len(existing.sample_ids)} samples, plan "
                f"{existing.plan or None}; this shard has {len(ids)}, plan {self.plan.key}): the shards were started "
                "with different samples (sample limits, data roots or annotation files differ). Start every shard "
                "with the same command, or use a new output directory")
        return path


def select(shard: Shard, items: Sequence[ShardItem], run_dir: Path) -> ShardSelection:
    """This shard's selection under the run's pinned plan."""
    shard = Shard(*shard).checked()
    plan = pinned_plan(run_dir, items, shard.count)
    groups = {(it.benchmark, it.sample_id): it.group for it in items}
    return ShardSelection(shard, plan, groups)


def select_items(shard: Shard, items: Sequence[ShardItem], probe: bool = True) -> list[bool]:
    """Without a run directory to pin a plan in (`preprocess --shard`): whether each item is in `shard`."""
    shard = Shard(*shard).checked()
    plan = make_plan(items, shard.count, probe=probe)
    return [plan.owner[it.group] == shard.index for it in items]


def shard_slice(shard: Shard, loaded: Sequence[Loaded], data_root: Path | None,
                allow_outside: bool = False) -> list[Loaded]:
    """(benchmark, spec, samples) triples cut down to `shard`'s samples, split as `run --shard` splits them."""
    items = [it for b, spec, samples in loaded for it in items_for(b, samples, spec, data_root, allow_outside)]
    flags = iter(select_items(shard, items))
    return [(b, spec, [s for s in samples if next(flags)]) for b, spec, samples in loaded]


# -- create-once files on shared filesystems -------------------------------------------------------------------------
def publish_once(path: Path, text: str) -> str:
    """Create `path` holding `text` unless it exists; return what is in it now (the first writer wins).

    The text is written and fsynced under a unique name, then hard-linked into place: `link` fails when the name
    exists, atomically, also on NFS, so readers never see a partial file. Filesystems without hard links fall back
    to an exclusive create (readers retry a short-lived partial file, see `read_published`)."""
    path = Path(path)
    if path.exists():
        return read_published(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # never matches *.json
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links here (some FUSE / object-store mounts)
            try:
                with open(path, "x", encoding="utf-8") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
            except FileExistsError:
                pass
    finally:
        tmp.unlink(missing_ok=True)
    return read_published(path)


def read_published(path: Path, attempts: int = 20) -> str:
    """Text of a create-once JSON file, waiting briefly while a no-hard-link writer is still writing it."""
    for _ in range(attempts):
        text = Path(path).read_text(encoding="utf-8")
        try:
            json.loads(text)
            return text
        except ValueError:
            time.sleep(0.05)
    raise UserError(f"{path} is not valid JSON; remove it and start the shards again")
