"""Decode worker process: `python -m vbench_async.frames.worker`, driven by `pool.DecodePool`.

Protocol: JSON lines. The worker first prints {"ready": true, "pid": N}; then for each job line
{"id" (the key), "video", "fingerprint", "spec", "window", "decoder", "codec", "out"} it decodes, writes the cache
entry itself (atomically) and answers {"id", "ok": true, "bytes", "decode_seconds"} or {"id", "ok": false, "kind",
"message"}. A job may add "same_pass": [{"spec", "out", "key"}, ...]: more specs of the same video and window, sampled
from the same single decode pass (a frame-budget sweep); "bytes" is then the sum over all entries written. Frames
never cross the pipe (no pickling; the parent reads the entry from disk). The worker exits when stdin closes. The job
and the reply are declared in `decode_job.py`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from ..worker_process import ReadyMessage

THREADS_ENV = "VBENCH_ASYNC_DECODE_THREADS"
DECODER_ENV = "VBENCH_ASYNC_DECODER"


def _send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def handle(request: dict[str, Any]) -> dict[str, Any]:
    from ..failure_kinds import FailureKind
    from ..record_io import RecordError
    from .decode_job import DecodeJob, DecodeReply
    from .decode_video import decode_video_specs
    from .entry_file import write_entry
    from .errors import FrameError
    from .spec import FrameSpec

    try:
        job = DecodeJob.from_json(request, "decode job")
    except RecordError as exc:  # the parent's bug: report it, keep serving
        return DecodeReply(ok=False, kind=FailureKind.DECODE_ERROR, message=str(exc)).to_json()

    def failed(kind: str, message: str) -> dict[str, Any]:
        return DecodeReply(id=job.id, ok=False, kind=kind, message=message).to_json()

    try:
        targets = job.targets()
        specs = [FrameSpec.from_dict(t.spec) for t in targets]
        window = (job.window[0], job.window[1]) if job.window is not None else None
        threads = int(os.environ.get(THREADS_ENV, "1"))
        decoded = decode_video_specs(Path(job.video), specs, window, job.decoder, threads)
    except FrameError as exc:
        return failed(exc.kind, str(exc))
    except MemoryError:
        return failed(FailureKind.DECODE_ERROR, "out of memory while decoding")
    except Exception as exc:  # a bug or an odd file: report it, keep serving
        return failed(FailureKind.DECODE_ERROR, f"{type(exc).__name__}: {exc}")
    size = 0
    for target, (frames, meta) in zip(targets, decoded, strict=True):
        out = target.out
        try:
            size += write_entry(Path(out), frames, meta, job.codec, video=job.fingerprint, key=target.key)
        except Exception as exc:  # the cache directory's fault (full disk, lost mount, permissions), not the video's
            # (safetensors reports a failed write as its own error type, with the OS message inside)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
            return failed(FailureKind.CACHE_UNWRITABLE, f"{reason} (writing {out})")
    return DecodeReply(id=job.id, ok=True, bytes=size, decode_seconds=decoded[0][1].decode_seconds).to_json()


def main() -> int:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # decoder libraries may print; keep stdout for the protocol only
    threads = int(os.environ.get(THREADS_ENV, "1"))
    import torch  # noqa: F401  (import the heavy modules now, so the first job's timeout covers decoding only)

    torch.set_num_threads(threads)
    decoder = os.environ.get(DECODER_ENV, "pyav")
    from .decoders import DECODER_MODULES

    if decoder in DECODER_MODULES:
        __import__(DECODER_MODULES[decoder])
    _send(channel, ReadyMessage(ready=True, pid=os.getpid()).to_json())
    for line in sys.stdin:
        if line.strip():
            _send(channel, handle(json.loads(line)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
