"""A data root laid out as a user's real one: the reference annotation records of every benchmark (../shared, read at
test time, never copied into the project) in the files and folders their cards name, each video path filled with a
real 150 s clip. All paths share one or two clips (hard links), so the frame cache decodes each content once and
vLLM encodes it once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.videos import write_video

SECONDS = 150.0
CLIP = {"fps": 4, "width": 160, "height": 96}  # small pictures: the card's frame rules, not the source, set the tokens


def write_clips(folder: Path, n: int) -> list[Path]:
    """`n` 150 s clips of different content (with two, not every sample hits the same cache entry)."""
    folder.mkdir(parents=True, exist_ok=True)
    return [write_video(folder / f"clip{i}.mp4", seconds=SECONDS, seed=i, textured=bool(i), **CLIP) for i in range(n)]


def _place(target: Path, source: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:  # another filesystem: a copy holds the same content
        target.write_bytes(source.read_bytes())


def _image(path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        Image.new("RGB", (320, 240), (200, 120, 40)).save(path)


def lay_out(root: Path, annotations: Path, benchmarks: list, per_benchmark: int | None,
            clips: int = 1) -> dict[str, int]:
    """Write the first `per_benchmark` records (all when None) of each benchmark with a unified annotation file in
    `annotations` into `root`, with a clip at every video path and an image at every image path; benchmark -> count.
    Benchmarks whose file is absent are left out (a user without that dataset)."""
    from vbench_async.samples import iter_records

    files = write_clips(root / ".clips", clips)
    written: dict[str, int] = {}
    for bench in benchmarks:
        src = bench.card.sources.unified
        if src is None or not (annotations / src.annotation).is_file():
            continue
        records = []
        for i, rec in enumerate(iter_records(annotations / src.annotation)):
            if per_benchmark is not None and i >= per_benchmark:
                break
            records.append(rec)
        target = root / src.annotation
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = "\n".join(json.dumps(r, ensure_ascii=False) for r in records)
        target.write_text(lines + "\n" if src.annotation.endswith(".jsonl") else f"[{','.join(lines.splitlines())}]",
                          encoding="utf-8")
        for i, rec in enumerate(records):
            if isinstance(rec, dict) and isinstance(rec.get("path"), str):
                _place(root / src.video_dir / rec["path"], files[i % len(files)])
            if isinstance(rec, dict) and isinstance(rec.get("image_path"), str):
                _image(root / (src.image_dir or src.video_dir) / rec["image_path"])
        written[bench.id] = len(records)
    return written
