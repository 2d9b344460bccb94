"""The built-in demo suite: synthetic mp4 videos plus annotation files in the unified record format.

Layout of a generated folder (what a demo benchmark card points at):
    videos/v000.mp4 ...          H.264, fps 24 / 25 / 29.97 / 30, landscape and portrait, 2-60 s
    annotations/<group>.json     one file per group in `GROUPS` (mc, count, tg, stvg, ocr, yesno)
    suite.json                   parameters, per-video facts, and every scene as drawn (the ground truth's source)
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import build_once, default_home
from .questions import GROUPS, Question, scene_questions
from .scenes import plan_scene
from .videos import Scene, write_mp4

SUITE_VERSION = 2  # bump when generation changes what gets written (2: x264 without macroblock tree)
DEMO_PARAMS: dict[str, Any] = dict(n_videos=22, questions_per_video=3, seed=0, min_s=2.0, max_s=60.0)
SIZES = ((160, 96), (96, 160), (192, 108), (108, 192), (256, 144), (144, 256), (320, 180), (180, 320))
FRAME_RATES = (Fraction(24), Fraction(25), Fraction(30000, 1001), Fraction(30))


def demo_suite_dir(home: Path | None = None) -> Path:
    """Where the demo suite lives once generated."""
    return (home or default_home()) / "suites" / f"demo-v{SUITE_VERSION}"


def ensure_demo_suite(home: Path | None = None) -> Path:
    """Return the demo suite folder, generating it on first use (atomic; concurrent callers wait for one build)."""
    return build_once(demo_suite_dir(home), lambda tmp: generate_suite(tmp, **DEMO_PARAMS))


def generate_suite(out_dir: Path, n_videos: int = 22, questions_per_video: int = 3, seed: int = 0,
                   min_s: float = 2.0, max_s: float = 60.0, workers: int | None = None,
                   sizes: tuple[tuple[int, int], ...] = SIZES) -> dict[str, int]:
    """Write `n_videos` videos and about `n_videos * questions_per_video` questions into `out_dir`.

    Durations are spread geometrically from `min_s` to `max_s` (so both ends occur) and shuffled; sizes and frame
    rates cycle through `sizes` (default `SIZES`: small, for speed; perf scripts pass realistic ones) and
    `FRAME_RATES`. Each video's questions rotate through the groups, so one video
    serves several benchmarks. Deterministic for the same arguments (`workers`, the number of videos encoded at
    once, defaults to the CPU count up to 4 and does not change the output). Returns the question count per group.
    """
    if n_videos < 1 or questions_per_video < 1:
        raise ValueError("n_videos and questions_per_video must be at least 1")
    if not 0 < min_s <= max_s:
        raise ValueError(f"need 0 < min_s <= max_s, got {min_s}, {max_s}")
    out_dir = Path(out_dir)

    durations = np.geomspace(min_s, max_s, n_videos).round(1)
    durations = durations[np.random.default_rng([seed, n_videos]).permutation(n_videos)]
    records: dict[str, list[dict[str, Any]]] = {g: [] for g in GROUPS}
    videos: list[dict[str, Any]] = []
    scenes: list[Scene] = []
    for i, duration in enumerate(durations):
        rng = np.random.default_rng([seed, i])  # per video: a video does not depend on how many others there are
        width, height = sizes[i % len(sizes)]
        fps = FRAME_RATES[(i + i // len(sizes)) % len(FRAME_RATES)]  # every size meets every rate
        scene = plan_scene(rng, f"v{i:03d}", width, height, fps, float(duration))
        picked = _pick(scene_questions(scene, rng), questions_per_video, offset=i * questions_per_video)
        for q in picked:
            records[q.group].append(record_of(q, scene, len(records[q.group])))
        videos.append(_video_facts(scene))
        scenes.append(scene)
    counts = write_videos_and_annotations(out_dir, scenes, records, workers)
    manifest = {
        "name": "demo", "version": SUITE_VERSION,
        "params": dict(n_videos=n_videos, questions_per_video=questions_per_video, seed=seed, min_s=min_s,
                       max_s=max_s),
        "questions": counts, "videos": videos, "scenes": [scene_dict(sc) for sc in scenes],
    }
    (out_dir / "suite.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return counts


def write_videos_and_annotations(out_dir: Path, scenes: list[Scene], records: dict[str, list[dict[str, Any]]],
                                 workers: int | None = None) -> dict[str, int]:
    """Encode every scene to videos/<name>.mp4 (`workers` at once) and write annotations/<group>.json; the question
    count per group."""
    (out_dir / "videos").mkdir(parents=True, exist_ok=True)
    (out_dir / "annotations").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1)) as pool:  # encoding frees the GIL
        longest_first = sorted(scenes, key=lambda sc: -sc.num_frames)
        list(pool.map(lambda sc: write_mp4(sc, out_dir / "videos" / f"{sc.name}.mp4"), longest_first))
    for group, recs in records.items():
        (out_dir / "annotations" / f"{group}.json").write_text(json.dumps(recs, indent=1) + "\n")
    return {g: len(r) for g, r in records.items()}


def _pick(by_group: dict[str, list[Question]], k: int, offset: int) -> list[Question]:
    """Take `k` questions round-robin over the groups, starting at `offset` (balances the groups across videos)."""
    order = list(GROUPS)
    order = order[offset % len(order):] + order[: offset % len(order)]
    pools = {g: list(by_group.get(g, ())) for g in order}
    picked: list[Question] = []
    while len(picked) < k and any(pools.values()):
        for g in order:
            if pools[g] and len(picked) < k:
                picked.append(pools[g].pop(0))
    return picked


def duration_bucket(seconds: float) -> str:
    return "short" if seconds < 10 else "medium" if seconds <= 30 else "long"


def record_of(q: Question, scene: Scene, index: int, problem_type: str | None = None,
              source: str = "demo") -> dict[str, Any]:
    """The unified-format record of a question about `scene` (`problem_type` defaults to the demo group's)."""
    return {
        "problem_id": f"{q.group}-{index:04d}",
        "problem": q.problem,
        "problem_type": problem_type or q.problem_type,
        "options": list(q.options),
        "solution": q.solution,
        "path": f"{scene.name}.mp4",
        "data_type": "video",
        "data_source": source,
        "category": q.category,
        "duration": duration_bucket(scene.duration),
        "orientation": "landscape" if scene.width >= scene.height else "portrait",
    }


def _video_facts(scene: Scene) -> dict[str, Any]:
    return {"name": scene.name, "path": f"videos/{scene.name}.mp4", "width": scene.width, "height": scene.height,
            "fps": str(scene.fps), "num_frames": scene.num_frames, "duration": round(scene.duration, 6)}


def scene_dict(scene: Scene) -> dict[str, Any]:
    d = asdict(scene)
    d["fps"] = str(scene.fps)
    return d
