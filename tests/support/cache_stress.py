"""Readers and writers of one frame cache beside `cache gc`, `compact` and `verify`, checking every served frame.

The truth for each video comes from a fresh decode outside the cache. A reader asks its `FrameCache` for every video,
round after round, and compares each answer (the frames' hash, indices and fps) with it. A second writer replaces
the same keys' entries with the same frames as another run's decode would (raw, other decode times, so other
header lengths), which is what let a two-open read pair one file's header with another file's frames. Run as a
script, one reader is one process ("a run"): `python cache_stress.py ROOT VIDEO_DIR ROUNDS CODEC OUT.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vbench_async.failure_kinds import TRANSIENT_KINDS
from vbench_async.frames import FrameCache, FrameError, FrameSpec
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.entry_file import write_entry
from vbench_async.frames.keys import fingerprint
from vbench_async.frames.maintenance import compact_cache, gc_cache, verify_cache

SPEC = FrameSpec("qwen3-vl", max_frames=6, min_pixels=2 * 1024, max_pixels=12 * 1024)


def frames_hash(frames: np.ndarray, indices: tuple[int, ...], fps: float) -> str:
    return hashlib.sha256(frames.tobytes() + json.dumps([list(indices), fps]).encode()).hexdigest()


def truth(videos: list[Path]) -> dict[str, str]:
    """Each video's true frames, from a decode that never touches a cache."""
    out = {}
    for video in videos:
        frames, meta = decode_video(video, SPEC)
        out[str(video)] = frames_hash(frames, meta.frames_indices, meta.fps)
    return out


@dataclass
class Tally:
    served: int = 0
    wrong: list[str] = field(default_factory=list)  # videos served frames that differ from the truth
    errors: Counter[str] = field(default_factory=Counter)  # failure kind (or exception type) -> count

    def add(self, other: Tally) -> None:
        self.served += other.served
        self.wrong += other.wrong
        self.errors.update(other.errors)

    def final_errors(self) -> dict[str, int]:
        return {k: n for k, n in self.errors.items() if k not in TRANSIENT_KINDS}


def read_rounds(cache: FrameCache, videos: list[Path], expected: dict[str, str], rounds: int) -> Tally:
    tally = Tally()
    for _ in range(rounds):
        for video in videos:
            try:
                got = cache.get_or_decode(video, SPEC)
            except FrameError as exc:
                tally.errors[exc.kind] += 1
                continue
            except Exception as exc:  # anything else is a bug the stress found
                tally.errors[type(exc).__name__] += 1
                continue
            tally.served += 1
            if frames_hash(got.frames, got.meta.frames_indices, got.meta.fps) != expected[str(video)]:
                tally.wrong.append(video.name)
    return tally


def rewrite_loop(root: Path, videos: list[Path], stop: threading.Event, tally: Tally) -> None:
    """Another run's decode worker: writes the same keys again (raw, a decode time of another length each time)."""
    decoded = [(video, fingerprint(video), *decode_video(video, SPEC)) for video in videos]
    cache = FrameCache(root, workers=1)  # for its layout and keys only: never decodes here
    i = 0
    while not stop.is_set():
        video, fp, frames, meta = decoded[i % len(decoded)]
        meta = dataclasses.replace(meta, decode_seconds=[0.5, 0.123456789012345][i % 2],
                                   decoder=["pyav", "x" * 13][i % 2])
        try:
            write_entry(cache.layout.entry_path(cache.key(video, SPEC)), frames, meta, "raw", video=fp)
        except Exception as exc:
            tally.errors[f"rewrite:{type(exc).__name__}"] += 1
        i += 1
    cache.close()


def maintenance_loop(root: Path, stop: threading.Event, tally: Tally) -> None:
    """gc (every entry counts as old), compact to alternating codecs, and verify --delete, over and over."""
    i = 0
    while not stop.is_set():
        for name, job in (("gc", lambda: gc_cache(root, older_than_days=0, temp_age_s=3600)),
                          ("compact", lambda: compact_cache(root, ("zstd", "raw")[i % 2])),
                          ("verify", lambda: verify_cache(root, remove=True))):
            try:
                report = job()
                if name == "verify" and report.corrupt:
                    tally.errors[f"verify found corrupt: {report.corrupt[0][1]}"] += len(report.corrupt)
                if name == "compact" and report.corrupt:
                    tally.errors["compact found corrupt"] += report.corrupt
            except Exception as exc:
                tally.errors[f"{name}:{type(exc).__name__}: {exc}"[:120]] += 1
        i += 1


def stress(root: Path, videos: list[Path], rounds: int, readers: int = 2) -> Tally:
    """Reader threads (one cache each, one writing zstd and one raw), a second writer and maintenance, together."""
    expected = truth(videos)
    stop = threading.Event()
    side = Tally()
    helpers = [threading.Thread(target=rewrite_loop, args=(root, videos, stop, side)),
               threading.Thread(target=maintenance_loop, args=(root, stop, side))]
    caches = [FrameCache(root, workers=1, codec=("zstd", "raw")[i % 2]) for i in range(readers)]
    results = [Tally() for _ in caches]
    threads = [threading.Thread(target=lambda c=c, r=r: r.add(read_rounds(c, videos, expected, rounds)))
               for c, r in zip(caches, results)]
    for t in helpers + threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    for t in helpers:
        t.join()
    for c in caches:
        c.close()
    total = Tally()
    for r in [*results, side]:
        total.add(r)
    return total


def main(argv: list[str]) -> int:
    root, video_dir, rounds, codec, out = Path(argv[0]), Path(argv[1]), int(argv[2]), argv[3], Path(argv[4])
    videos = sorted(video_dir.glob("*.mp4"))
    expected = json.loads((video_dir / "truth.json").read_text())
    with FrameCache(root, workers=1, codec=codec) as cache:
        tally = read_rounds(cache, videos, expected, rounds)
    out.write_text(json.dumps({"served": tally.served, "wrong": tally.wrong, "errors": dict(tally.errors)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
