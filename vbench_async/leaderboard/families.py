"""Model families on the leaderboard: which family each run's model belongs to, and the frame settings a benchmark
was run with, in the few words shown next to its score."""

from __future__ import annotations

from ..results.result_config import RecordedFrames
from .load import BenchRun, Run

UNKNOWN = "unknown"


def run_family(run: Run) -> str:
    """The family the run recorded (summary, else manifest); "unknown" for runs from before families were recorded."""
    recorded = run.manifest.model.family if run.manifest is not None else None
    return str(run.summary.family or recorded or UNKNOWN)


def frame_label(frames: RecordedFrames | None) -> str:
    """ "8 f, 112 px" / "2 fps, 4-32 f, <=65536 px": the settings that decide which frames and how large."""
    if frames is None or frames.fps is None:
        return ""
    if frames.nframes:
        count = f"{frames.nframes} f"
    else:
        count = f"{frames.fps:g} fps, {frames.min_frames}-{frames.max_frames} f"
    size = f"{frames.side} px" if frames.side else f"<={frames.max_pixels} px"
    return f"{count}, {size}"


def bench_frames(bench: BenchRun) -> str:
    return frame_label(bench.config.frames if bench.config is not None else None)


def grouped(runs: list[Run]) -> list[Run]:
    """Runs grouped by family (families in first-seen order; runs keep their order within a family)."""
    order = list(dict.fromkeys(run_family(r) for r in runs))
    return sorted(runs, key=lambda r: order.index(run_family(r)))
