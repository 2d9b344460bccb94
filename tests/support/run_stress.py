"""Real `vbench-async run` commands sharing one frame cache while `vbench-async cache gc|compact|verify` loop.

The model is an OpenAI-compatible server on 127.0.0.1 (`FrameServer`, a thread of the test process) that decodes
the PNG frames each request carries and answers with a digest of those pixels and of the frame indices and fps it was
told, so every result line's `output` says exactly what the "model" saw. The truth comes from the project's own
decoder run once in the test process on the same videos with the run's frame spec, outside any cache (`truths`);
`check_lines` compares each line's output digest, and its `frames` record (cache key, indices, timestamps, sizes),
with it. A served frame that differs from a fresh decode therefore fails the check, whichever layer served it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
from conftest import REPO
from PIL import Image
from support.fault_server import LocalServer
from support.hostile import CARD, write_data_map
from support.videos import write_video

from vbench_async.failure_kinds import TRANSIENT_KINDS
from vbench_async.frames import FrameSpec
from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.keys import cache_key, fingerprint

MODEL = "tiny-qwen2.5-vl"
FRAMES = {"max_frames": 4, "max_pixels": 16384}  # as `run_args` passes them: --max-frames 4 --max-pixels 16384
DIGEST = re.compile(r"frames=([0-9a-f]{64})")


def digest(frames: np.ndarray, indices: list[int], fps: float) -> str:
    """What a model is given of a video: the pixels (with their shape) and the frame indices and fps it is told."""
    head = json.dumps([list(frames.shape), [int(i) for i in indices], round(float(fps), 6)]).encode()
    return hashlib.sha256(head + np.ascontiguousarray(frames, np.uint8).tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------- the "model"


class FrameServer(LocalServer):
    """An OpenAI-compatible chat server that answers `<answer>A</answer> frames=<digest of the frames received>`.

    The openai backend sends a video as PNG frames (lossless) in one data URL, its indices and fps in
    `media_io_kwargs`; this decodes them back, so the digest is of the very pixels the run served."""

    def __init__(self) -> None:
        self.requests = 0
        self.bad: list[str] = []  # requests this server could not read (a test failure of its own)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    text = f"<answer>A</answer> frames={server.frames_digest(body)}"
                except Exception as exc:  # noqa: BLE001 - told to the test, answered as a server error
                    with server._lock:
                        server.bad.append(f"{type(exc).__name__}: {exc}")
                    return self._send(400, b'{"error": "unreadable request"}')
                with server._lock:
                    server.requests += 1
                self._send(200, json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)

    @staticmethod
    def frames_digest(body: dict[str, Any]) -> str:
        parts = [p for p in body["messages"][0]["content"] if p.get("type") == "video_url"]
        url = parts[0]["video_url"]["url"]
        frames = np.stack([np.asarray(Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB"))
                           for b in url.split("base64,", 1)[1].split(",")])
        told = body["media_io_kwargs"]["video"]
        return digest(frames, told["frames_indices"], told["fps"])



# ----------------------------------------------------------------------------------------------- suite and truth


def write_suite(folder: Path, n_videos: int, questions: int) -> tuple[Path, dict[str, Path]]:
    """`n_videos` real mp4 files of different lengths and sizes, `questions` questions each; returns the data map
    and each sample id's video."""
    videos = folder / "videos"
    records, video_of = [], {}
    for v in range(n_videos):
        path = write_video(videos / f"v{v}.mp4", frames=20 + 6 * v, fps=10 + v, width=64 + 16 * (v % 3),
                           height=48, natural=True, seed=v)
        for q in range(questions):
            sid = f"v{v}-q{q}"
            records.append({"problem_id": sid, "problem": f"Question {q} about video {v}: which colour?",
                            "problem_type": "multiple choice", "options": ["A. red", "B. green", "C. blue"],
                            "solution": "<answer>A</answer>", "path": path.name, "subject": "stress"})
            video_of[sid] = path
    (folder / "questions.json").write_text(json.dumps(records))
    return write_data_map(folder, "questions.json"), video_of


def run_spec() -> FrameSpec:
    """The frame spec the run resolves for its samples (card, checkpoint, then the command's overrides)."""
    from vbench_async.benchmarks import get_benchmark
    from vbench_async.models import resolve

    return get_benchmark(CARD).frame_spec(resolve(MODEL), FRAMES)


@dataclass(frozen=True)
class Truth:
    key: str
    digest: str
    indices: list[int]
    timestamps: list[float]
    size: list[int]
    fps: float


def truths(videos: list[Path], spec: FrameSpec) -> dict[Path, Truth]:
    """Each video's true frames: a fresh decode with the project's decoder, no cache involved."""
    out = {}
    for video in sorted(set(videos)):
        frames, meta = decode_video(video, spec)
        indices = list(meta.frames_indices)
        out[video] = Truth(cache_key(fingerprint(video), spec, None), digest(frames, indices, meta.fps), indices,
                           [round(i / meta.fps, 3) for i in indices], [meta.resized_height, meta.resized_width],
                           meta.fps)
    return out


# ----------------------------------------------------------------------------------------------- runs and checks


def run_command(data_map: Path, out: Path, cache: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "vbench_async", "run", "--model", MODEL, "--benchmarks", CARD,
            "--data-root", str(data_map), "--output-dir", str(out), "--cache-dir", str(cache),
            "--max-frames", str(FRAMES["max_frames"]), "--max-pixels", str(FRAMES["max_pixels"]), "--no-progress",
            "--no-site", "--backend", "openai", "--base-url", url, "--max-retries", "1", "--request-timeout", "60",
            "--workers", "1", *extra]


def result_lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((out / "results").glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


@dataclass
class Checked:
    scored: int = 0
    transient: Counter[str] = field(default_factory=Counter)  # kind -> lines (a re-run must fix them)
    final: list[str] = field(default_factory=list)  # "sample: kind: message" (never allowed)
    wrong: list[str] = field(default_factory=list)  # "sample: what differs" (never allowed)


def check_lines(lines: list[dict[str, Any]], video_of: dict[str, Path], truth: dict[Path, Truth]) -> Checked:
    """Each answered line's frames against the truth of its video; errors sorted into transient and final."""
    got = Checked()
    for line in lines:
        sid = line["sample_id"]
        if line.get("error"):
            kind = line["error"]["kind"]
            if kind in TRANSIENT_KINDS:
                got.transient[kind] += 1
            else:
                got.final.append(f"{sid}: {kind}: {line['error'].get('message', '')[:200]}")
            continue
        t, seen = truth[video_of[sid]], line.get("frames") or {}
        found = DIGEST.search(line.get("output") or "")
        told = {"cache_key": seen.get("cache_key"), "indices": seen.get("indices"),
                "timestamps": seen.get("timestamps"), "size": seen.get("size"), "fps": seen.get("fps"),
                "pixels": found.group(1) if found else None}
        true = {"cache_key": t.key, "indices": t.indices, "timestamps": t.timestamps, "size": t.size, "fps": t.fps,
                "pixels": t.digest}
        differ = sorted(k for k in true if told[k] != true[k])
        if differ:
            got.wrong.append(f"{sid}: {', '.join(differ)} differ from a fresh decode")
        else:
            got.scored += 1
    return got


def start_maintenance(cache: Path, max_gb: float, folder: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """The third process (`maintain_cache.py`): gc, compact and verify loop on `cache` until the stop file exists.
    Returns the process, its stop file and its log."""
    stop, log = folder / "maintenance.stop", folder / "maintenance.jsonl"
    stop.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "maintain_cache.py"), str(cache),
                             str(max_gb), str(stop), str(log)], cwd=REPO)
    return proc, stop, log


def stop_maintenance(proc: subprocess.Popen[bytes], stop: Path, log: Path) -> list[dict[str, Any]]:
    """Stop the loop after its current pass; every command it ran, in order."""
    stop.touch()
    proc.wait(timeout=300)
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
