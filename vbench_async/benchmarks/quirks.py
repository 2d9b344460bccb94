"""The few per-benchmark hooks no card field can express.

Two kinds:
- sample hooks (`quirks: [name]` in a card) run on every parsed Sample of either source;
- hub hooks (`sources.hub.hook`) turn one official record into unified records when the release's shape is too
  far from a flat mapping (OVO-Bench's forward probes, ST-Align's frame-indexed boxes).
Generic, card-driven steps (fields from video paths, clip fallback, duplicate ids) live here too, so every
transformation of a loaded sample is in one module.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import SampleError
from ..failure_kinds import FailureKind
from ..samples import Sample
from .cards import ClipFallback

log = logging.getLogger(__name__)
VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".avi", ".mov")


# ------------------------------------------------------------------------------------------------ sample hooks


def videomathqa_binary(sample: Sample) -> Sample:
    """VideoMathQA: the four binary variants of a question share the MCQ's `problem_id`.

    Give each variant its own id (results are keyed by id) and record the question it belongs to, which the MBin
    score groups by: a question counts only when all of its binary variants are right.
    """
    variant = sample.fields.get("mbinary_id")
    if variant is None or "mbin_group" in sample.fields:
        return sample
    return replace(sample, sample_id=f"{sample.sample_id}/mbin{variant}",
                   fields={**sample.fields, "mbin_group": sample.sample_id})


# The unified videommmu files hold the three tracks as consecutive blocks of 300 ids, one question per video each:
# ids 1-300 carry the Adaptation question's image (documented in the predecessor's notes: `image_path`, `<image 1>`);
# 301-600 ask about the same videos in changed scenarios ("Based on your understanding of the solution ...":
# Comprehension) and 601-900 about what the video shows ("shown at 4:18", "does NOT appear in the video frame":
# Perception), read from the records.
VIDEOMMMU_TRACK_BLOCKS = ((1, 300, "Adaptation"), (301, 600, "Comprehension"), (601, 900, "Perception"))


def videommmu_track(sample: Sample) -> Sample:
    """Video-MMMU: the track of a unified record, from its id block (the hub source names it by its folder).

    Only a plain integer id from 1 to 900 is mapped; any other record keeps no track (its breakdown is then reported
    as unavailable, never guessed). `track_from` says where the track came from."""
    if "track" in sample.fields:
        return sample
    try:
        n = int(str(sample.sample_id))
    except ValueError:
        return sample
    for lo, hi, track in VIDEOMMMU_TRACK_BLOCKS:
        if lo <= n <= hi:
            return replace(sample, fields={**sample.fields, "track": track, "track_from": "unified id block"})
    return sample


SAMPLE_HOOKS: dict[str, Callable[[Sample], Sample]] = {
    "videomathqa_binary": videomathqa_binary,
    "videommmu_track": videommmu_track,
}


def add_path_fields(sample: Sample, path_fields: Mapping[str, str]) -> Sample:
    """Category fields read from the video path (MMVU subject, MVBench source), unless the record has them."""
    if not sample.video or not path_fields:
        return sample
    extra = {}
    for name, regex in path_fields.items():
        if name not in sample.fields:
            m = re.search(regex, sample.video)
            if m:
                extra[name] = m.group(1)
    return replace(sample, fields={**sample.fields, **extra}) if extra else sample


def dedupe_ids(items: list[Sample | SampleError], benchmark: str) -> list[Sample | SampleError]:
    """Make sample ids unique (results are keyed by id): later duplicates get "#2", "#3"... in file order."""
    ids = [s.sample_id if isinstance(s, Sample) else s.sample_id for s in items]
    dupes = {i for i, n in Counter(ids).items() if n > 1}
    if not dupes:
        return items
    log.warning("%s: %d sample id(s) occur more than once; suffixing repeats with #N", benchmark, len(dupes))
    seen: Counter[str] = Counter()
    taken = set(ids)  # every id of the file, later ones too: a new id never takes one a record already has
    out: list[Sample | SampleError] = []
    for item, sid in zip(items, ids):
        seen[sid] += 1
        if sid in dupes and seen[sid] > 1:
            n = seen[sid]
            while f"{sid}#{n}" in taken:
                n += 1
            new_id = f"{sid}#{n}"
            taken.add(new_id)
            if isinstance(item, Sample):
                item = replace(item, sample_id=new_id)
            else:
                item.sample_id = new_id
        out.append(item)
    return out


# ------------------------------------------------------------------------------------------------ clip fallback


@dataclass
class ClipResolver:
    """Replace a missing pre-cut clip by its source video plus a (start, end) window."""

    spec: ClipFallback
    clip_root: Path
    source_root: Path
    _index: dict[str, str] | None = None

    def _find(self, stem: str) -> str | None:
        if not self.spec.search:
            for ext in VIDEO_EXTS:
                if (self.source_root / f"{stem}{ext}").is_file():
                    return f"{stem}{ext}"
            return None
        if self._index is None:  # one walk of the source tree, only when a clip is actually missing
            self._index = {}
            for path in sorted(self.source_root.rglob("*")):
                if path.suffix.lower() in VIDEO_EXTS and path.is_file():
                    self._index.setdefault(path.stem, path.relative_to(self.source_root).as_posix())
        return self._index.get(stem)

    def __call__(self, sample: Sample) -> Sample:
        if not sample.video or (self.clip_root / sample.video).exists():
            return sample
        m = re.match(self.spec.pattern, Path(sample.video).name)
        if not m or not self.source_root.is_dir():
            return sample
        source = self._find(m.group("source"))
        if source is None:
            return sample
        window = (float(m.group("start")), float(m.group("end")))
        fields = {**sample.fields, "clip_source": sample.video}
        return replace(sample, video=source, window=window, fields=fields)


# ------------------------------------------------------------------------------------------------ hub hooks


@dataclass(frozen=True)
class HubContext:
    snapshot: Path
    video_root: Path


_OVO_CATEGORY = {
    **dict.fromkeys(("EPM", "ASI", "HLD"), "backward"),
    **dict.fromkeys(("STU", "OJR", "ATR", "ACR", "OCR", "FPD"), "realtime"),
    **dict.fromkeys(("REC", "SSR", "CRR"), "forward"),
}


def ovo_official(rec: Mapping[str, Any], ctx: HubContext) -> list[dict[str, Any]]:
    """OVO-Bench `ovo_bench_new.json`: backward/real-time items are MCQs on `chunked_videos/<id>.mp4`; each
    forward item holds probes (`test_info`), scored one per pre-cut clip `<id>_<i>.mp4`, as the unified file does."""
    task = str(rec.get("task", ""))
    if task not in _OVO_CATEGORY:
        raise SampleError(FailureKind.RECORD_INVALID, f"OVO task {task!r} is not one of {sorted(_OVO_CATEGORY)}")
    base = {"data_type": "video", "ovo_task": task, "ovo_category": _OVO_CATEGORY[task], "ovo_id": rec.get("id")}
    if _OVO_CATEGORY[task] != "forward":
        options = [f"{chr(65 + i)}: {o}" for i, o in enumerate(rec.get("options") or [])]
        gt = rec.get("gt")
        if not isinstance(gt, int) or not 0 <= gt < len(options):
            raise SampleError(FailureKind.RECORD_INVALID, f"OVO gt {gt!r} is not an index into {len(options)} options")
        return [{**base, "problem_id": f"ovo_{rec['id']}", "problem_type": "multiple choice",
                 "problem": rec.get("question", ""), "options": options, "path": f"{rec['id']}.mp4",
                 "solution": f"<answer>{chr(65 + gt)}</answer>", "realtime": rec.get("realtime")}]
    out = []
    for i, probe in enumerate(rec.get("test_info") or []):
        if task == "REC":
            question = rec.get("question") or f"How many times did they {rec.get('activity', '')}?"
            answer = str(probe.get("count"))
        else:
            question = (probe.get("step") if task == "SSR" else None) or rec.get("question", "")
            answer = "Yes" if probe.get("type") == 1 else "No"
        item = {**base, "problem_id": f"ovo_{rec['id']}_{i}", "problem_type": task, "problem": question,
                "options": [], "path": f"{rec['id']}_{i}.mp4", "solution": f"<answer>{answer}</answer>",
                "ovo_test_idx": i, "realtime": probe.get("realtime")}
        if task != "REC":
            item["ovo_type"] = probe.get("type")
        out.append(item)
    return out


def _video_fps(path: Path) -> float:
    if not path.is_file():
        raise SampleError(FailureKind.VIDEO_MISSING,
                          f"{path} is missing; ST-Align's frame-indexed spans need the video's fps")
    stat = path.stat()
    return _probe_fps(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4096)  # many questions share one video; the file's mtime and size are part of the key
def _probe_fps(path: str, mtime_ns: int, size: int) -> float:
    import av  # only ST-Align's official release needs a probe: its spans are frame indices

    from ..frames.av_errors import in_words

    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
    except (av.error.FFmpegError, IndexError) as exc:
        raise SampleError(FailureKind.DECODE_ERROR, in_words(f"cannot read the frame rate of {path}: {exc}")) from exc
    if not rate:
        raise SampleError(FailureKind.DECODE_ERROR, f"{path} reports no frame rate")
    return float(rate)


def stvg_official(rec: Mapping[str, Any], ctx: HubContext) -> list[dict[str, Any]]:
    """ST-Align `stvg.json`: spans and boxes are in frame indices and xywh pixels; the unified answer is seconds
    and xyxy boxes keyed by integer second (the first box of each second), with the clip (`meta.split`) as window.
    Whether `time_token` frames count from the clip start is inferred, not documented: they are read as absolute."""
    meta = rec.get("meta") or {}
    video = str(rec.get("video_path", ""))
    fps = float(meta["fps"]) if meta.get("fps") else _video_fps(ctx.video_root / video)
    tokens = meta.get("time_token") or {}
    if "<s>" not in tokens or "<e>" not in tokens:
        raise SampleError(FailureKind.RECORD_INVALID, "meta.time_token lacks <s>/<e>")
    boxes: dict[str, list[float]] = {}
    by_frame: dict[str, list[float]] = {}
    raw_boxes = (meta.get("spatial_token") or {}).get("<bboxes>") or {}
    for frame in sorted(raw_boxes, key=lambda f: int(f)):
        x, y, w, h = (float(v) for v in raw_boxes[frame])
        by_frame[str(int(frame))] = [x, y, x + w, y + h]
        boxes.setdefault(str(int(int(frame) / fps)), [x, y, x + w, y + h])
    conversations = rec.get("conversations") or [{}]
    question = re.sub(r"<video>\s*", "", str(conversations[0].get("value", ""))).strip()
    split = meta.get("split")
    out = {
        "data_type": "video", "problem_type": "spatial-temporal grounding", "problem": question, "options": [],
        "path": video, "problem_id": str(rec.get("id", rec.get("_index"))),
        "solution": "<answer>" + json.dumps({"time": [int(tokens["<s>"]) / fps, int(tokens["<e>"]) / fps],
                                             "boxes": boxes}) + "</answer>",
        "width": meta.get("width"), "height": meta.get("height"),
    }
    if isinstance(split, list) and len(split) == 2 and meta.get("width") and meta.get("height"):
        # LLaVA-ST's own per-item fields, so the official protocol can read its special-token answers
        out["meta"] = {"split": split, "width": meta["width"], "height": meta["height"], "fps": fps,
                       "time_token": {"<s>": tokens["<s>"], "<e>": tokens["<e>"]}, "boxes_by_frame": by_frame}
    if isinstance(split, list) and len(split) == 2:
        out["start"], out["end"] = split[0] / fps, split[1] / fps
    return [out]


HUB_HOOKS: dict[str, Callable[[Mapping[str, Any], HubContext], list[dict[str, Any]]]] = {
    "ovo_official": ovo_official,
    "stvg_official": stvg_official,
}
