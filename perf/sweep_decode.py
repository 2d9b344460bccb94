"""Frame-budget sweep decoding, side by side in one run: filling the cache for budgets 16, 32 and 64 frames with one
decode pass per video (`decode_video_specs`, what `run --max-frames 16,32,64` does) against one pass per budget
(three `decode_video` calls, what three separate runs do), on the same camera-like clips.

    PYTHONPATH=. .venv/bin/python perf/sweep_decode.py [--videos 4] [--seconds 60] [--repeats 3]

Clips are 640x360 H.264 at 30 fps (tests/support/videos.py, `natural=True`). Frames follow a 2 fps preset capped at
each budget, at most 200,704 px. Times are the best of --repeats, the two ways run alternately (the machine is
shared). Resizing (bicubic, antialiased) is the same work either way; the sweep saves the repeated opening, seeking
and decoding. Checks that both ways give identical frames. Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.videos import write_video  # noqa: E402

from vbench_async.frames import FrameSpec  # noqa: E402
from vbench_async.frames.decode_video import decode_video, decode_video_specs  # noqa: E402

BUDGETS = (16, 32, 64)


def interleaved(a, b, repeats: int) -> tuple[float, float, object, object]:
    """Best time of each of `a` and `b`, run alternately (which goes first alternates too): a busy machine slows
    both alike."""
    ta, tb, out_a, out_b = [], [], None, None
    for i in range(repeats):
        for fn, times in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
            out_a, out_b = (out, out_b) if fn is a else (out_a, out)
    return min(ta), min(tb), out_a, out_b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    specs = [FrameSpec("qwen3-vl", max_frames=b, max_pixels=200_704) for b in BUDGETS]
    with tempfile.TemporaryDirectory() as tmp:
        clips = [write_video(Path(tmp) / f"v{i}.mp4", seconds=args.seconds, fps=30, width=640, height=360,
                             natural=True) for i in range(args.videos)]
        one_pass, per_budget, together, apart = interleaved(
            lambda: [decode_video_specs(c, specs) for c in clips],
            lambda: [[decode_video(c, s) for s in specs] for c in clips], args.repeats)
    for a, b in zip(together, apart):
        for (fa, ma), (fb, mb) in zip(a, b):
            assert np.array_equal(fa, fb) and ma.frames_indices == mb.frames_indices
    print(f"{args.videos} videos x {args.seconds:g} s, budgets {','.join(map(str, BUDGETS))} (best of {args.repeats})")
    print(f"  one pass per video (sweep): {one_pass:8.2f} s")
    print(f"  one pass per budget:        {per_budget:8.2f} s")
    print(f"SUMMARY sweep_decode one_pass_s={one_pass:.2f} per_budget_s={per_budget:.2f} "
          f"speedup={per_budget / one_pass:.2f}x identical_frames=yes")


if __name__ == "__main__":
    main()
