"""Frame pipeline benchmark: decode+sample+resize vs cache load, cache bytes vs the predecessor's layouts,
decoder choice, fingerprint cost, and preprocess throughput with 1 and 2 workers. All measured in one run.

    PYTHONPATH=. .venv/bin/python perf/frames.py [--repeats 3] [--workdir DIR]

Videos are generated with PyAV (tests/videos.py): 10 s and 60 s at 640x360, 30 fps, with a moving random texture
(real decoding work); 600 s at 256x144, 24 fps, without it; a keyframe every 250 frames. The spec is the Qwen3-VL
default (2 fps, 32 frames). Times are the best of --repeats runs (the machine is shared; the minimum is the least
disturbed). Ends with one SUMMARY line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from videos import write_video  # noqa: E402  (tests/videos.py: the PyAV writer the tests use)

from vbench_async.frames import FrameCache, FrameSpec, VideoJob, preprocess  # noqa: E402
from vbench_async.frames.extract import decode_video  # noqa: E402
from vbench_async.frames.decoders import DECODERS  # noqa: E402
from vbench_async.frames.keys import fingerprint  # noqa: E402

# (seconds, fps, width, height, textured): the 600 s clip is small and untextured so generating it stays quick.
CLIPS = {"10s": (10, 30, 640, 360, True), "60s": (60, 30, 640, 360, True), "600s": (600, 24, 256, 144, False)}
SPEC = FrameSpec("qwen3-vl")


def timed(fn, repeats: int) -> tuple[float, object]:
    """Best wall time of `repeats` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def evict(path: Path) -> None:
    """Drop a file from the page cache, so the next read comes from disk ("cold")."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def make_videos(workdir: Path) -> dict[str, Path]:
    videos = {}
    for name, (seconds, fps, width, height, textured) in CLIPS.items():
        path = workdir / f"{name}.mp4"
        if not path.exists():
            t0 = time.perf_counter()
            write_video(path, seconds=seconds, fps=fps, width=width, height=height, gop=250, textured=textured)
            print(f"generated {name}: {width}x{height}, {path.stat().st_size / 1e6:.1f} MB in "
                  f"{time.perf_counter() - t0:.1f} s")
        videos[name] = path
    return videos


def bench_decode_vs_load(videos: dict[str, Path], cache: FrameCache, repeats: int) -> dict[str, dict]:
    print("\n== decode+sample+resize (pyav, in process) vs cache load, per sample ==")
    print(f"{'clip':>5} {'frames':>7} {'size':>9} {'decode':>8} {'load cold':>10} {'load warm':>10} "
          f"{'cold x':>7} {'warm x':>7}")
    rows = {}
    for name, path in videos.items():
        decode_s, (frames, meta) = timed(lambda p=path: decode_video(p, SPEC), repeats)
        cached = cache.get_or_decode(path, SPEC)
        entry = cache.layout.entry_path(cached.key)
        cold = []
        for _ in range(max(3, repeats)):
            evict(entry)
            t0 = time.perf_counter()
            cache.get(path, SPEC)
            cold.append(time.perf_counter() - t0)
        cold_s = min(cold)
        warm_s, _ = timed(lambda p=path: cache.get(p, SPEC), 10)
        rows[name] = dict(decode=decode_s, cold=cold_s, warm=warm_s, entry=entry, frames=frames, meta=meta)
        h, w = frames.shape[1:3]
        print(f"{name:>5} {frames.shape[0]:>7} {f'{w}x{h}':>9} {decode_s:>7.3f}s {cold_s * 1e3:>8.1f}ms "
              f"{warm_s * 1e3:>8.1f}ms {decode_s / cold_s:>6.0f}x {decode_s / warm_s:>6.0f}x")
    return rows


def bench_bytes(rows: dict[str, dict], workdir: Path) -> dict[str, tuple[float, float]]:
    """Our entry file vs the predecessor's layouts of the same frames: fp16 TCHW (eval) and float32 TCHW (train),
    written as safetensors (the float32 .pt would be the same bytes plus pickle framing; we do not write pickles)."""
    import numpy as np
    from safetensors.numpy import save_file

    print("\n== cache bytes per sample (same frames) ==")
    print(f"{'clip':>5} {'ours uint8':>11} {'fp16 TCHW':>10} {'fp32 TCHW':>10} {'vs fp16':>8} {'vs fp32':>8}")
    ratios = {}
    for name, row in rows.items():
        ours = row["entry"].stat().st_size
        tchw = np.ascontiguousarray(row["frames"].transpose(0, 3, 1, 2))
        sizes = {}
        for dtype in ("float16", "float32"):
            path = workdir / f"pred_{name}_{dtype}.safetensors"
            save_file({"frames": tchw.astype(dtype)}, str(path), metadata={"all_metadata": "{}"})
            sizes[dtype] = path.stat().st_size
            path.unlink()
        ratios[name] = (ours / sizes["float16"], ours / sizes["float32"])
        print(f"{name:>5} {ours / 1e6:>9.2f}MB {sizes['float16'] / 1e6:>8.2f}MB {sizes['float32'] / 1e6:>8.2f}MB "
              f"{ours / sizes['float16']:>8.3f} {ours / sizes['float32']:>8.3f}")
    return ratios


def bench_decoders(videos: dict[str, Path], rows: dict[str, dict], repeats: int) -> dict[str, dict[str, float]]:
    print("\n== decoders (decode+sample+resize, same frames, best of runs; pyav from the table above) ==")
    names = sorted(DECODERS)
    print(f"{'clip':>5} " + " ".join(f"{n:>8}" for n in names))
    out: dict[str, dict[str, float]] = {}
    for clip in ("60s", "600s"):
        out[clip] = {"pyav": rows[clip]["decode"]}
        for name in names:
            if name != "pyav":
                out[clip][name], _ = timed(lambda c=clip, n=name: decode_video(videos[c], SPEC, decoder=n), repeats)
        print(f"{clip:>5} " + " ".join(f"{out[clip][n]:>7.2f}s" for n in names))
    return out


def bench_fingerprint(videos: dict[str, Path]) -> dict[str, float]:
    print("\n== content fingerprint of the 600 s file (warm page cache) ==")
    path = videos["600s"]
    res = {}
    for mode in ("sampled", "full"):
        res[mode], _ = timed(lambda m=mode: fingerprint(path, m), 5)
        print(f"{mode:>8}: {res[mode] * 1e3:8.2f} ms for {path.stat().st_size / 1e6:.0f} MB")
    return res


def bench_throughput(workdir: Path, n_videos: int) -> dict[int, float]:
    print(f"\n== preprocess throughput: {n_videos} distinct 5 s 480x270 videos, warm workers ==")
    clips = []
    for i in range(n_videos + 2):
        path = workdir / f"tp{i}.mp4"
        if not path.exists():
            write_video(path, seconds=5, fps=30, width=480, height=270, gop=60, textured=True, seed=100 + i)
        clips.append(path)
    warmup, batch = clips[:2], clips[2:]
    rates = {}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(dir=workdir) as root, FrameCache(Path(root), workers=workers) as cache:
            preprocess([VideoJob(p, SPEC) for p in warmup[:workers]], cache, workers=workers, progress=False)
            report = preprocess([VideoJob(p, SPEC) for p in batch], cache, workers=workers, progress=False)
            assert report.cached == len(batch), report.summary()
            rates[workers] = report.cached / report.seconds
            print(f"{workers} worker(s): {rates[workers]:.2f} videos/s ({report.seconds:.1f} s)")
    print(f"speed-up with 2 workers: {rates[2] / rates[1]:.2f}x (2 cores, shared with other processes)")
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per measurement (best reported)")
    parser.add_argument("--workdir", type=Path, help="keep generated videos here (reused by later runs)")
    parser.add_argument("--throughput-videos", type=int, default=6, help="videos per preprocess throughput run")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()[0]
        print(f"CPU cores: {os.cpu_count()}, load average at start: {load:.1f}")
        videos = make_videos(workdir)
        with tempfile.TemporaryDirectory(dir=workdir) as root, FrameCache(Path(root), workers=1) as cache:
            rows = bench_decode_vs_load(videos, cache, args.repeats)
            ratios = bench_bytes(rows, workdir)
        decoders = bench_decoders(videos, rows, args.repeats)
        prints = bench_fingerprint(videos)
        rates = bench_throughput(workdir, args.throughput_videos)
    r60 = rows["60s"]
    best_600 = min(decoders["600s"], key=decoders["600s"].get)
    print(
        f"\nSUMMARY cache_vs_decode_60s={r60['decode'] / r60['cold']:.0f}x(cold) "
        f"{r60['decode'] / r60['warm']:.0f}x(warm) "
        f"cache_vs_decode_10s={rows['10s']['decode'] / rows['10s']['cold']:.0f}x "
        f"cache_vs_decode_600s={rows['600s']['decode'] / rows['600s']['cold']:.0f}x "
        f"bytes_vs_fp16={ratios['60s'][0]:.3f} bytes_vs_fp32={ratios['60s'][1]:.3f} "
        f"pyav_vs_decord_600s={decoders['600s']['decord'] / decoders['600s']['pyav']:.1f}x "
        f"fastest_600s={best_600} fingerprint_full_vs_sampled={prints['full'] / prints['sampled']:.0f}x "
        f"preprocess_1w={rates[1]:.2f}/s preprocess_2w={rates[2]:.2f}/s "
        f"load={os.getloadavg()[0]:.1f} total={time.perf_counter() - started:.0f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
