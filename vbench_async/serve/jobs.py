"""An evaluation job of the server: what a client may ask for (`JobSpec`, JSON in and out) and what the server
tells it back (`Job`: status, progress, run directory, summary).

A job asks for what `vbench-async run` would evaluate (benchmarks or a suite, frames, sampling, the model); how the
model is served (backend, engine, server URL) and the frame cache are the server's own settings.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..backends.base import SamplingParams
from ..benchmarks.selection import Selection
from ..errors import UserError
from ..frames.overrides import FrameOverrides
from ..runner import MODES, RunConfig

STATUSES = ("queued", "running", "done", "failed", "cancelled")
# Caps far above any real setting: one job must not stall the serial queue or the machine (400,000 requests in
# flight took 27 s and 330 MB before the first was sent). A field not named here is held to MAX_NUMBER.
LIMITS = {"concurrency": 4096, "max_samples": 100_000_000, "max_frames": 4096, "nframes": 4096, "fps": 1000,
          "max_pixels": 1 << 26, "total_pixels": 1 << 34, "max_tokens": 1 << 20, "top_k": 1 << 20,
          "repetition_penalty": 100, "presence_penalty": 100}
MAX_NUMBER = 1 << 53  # beyond it a JSON number is not exact in every client
FINISHED = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class JobSpec:
    """One evaluation request. Paths are the server's: a client on the same machine sends them absolute."""

    model: str | None = None  # default: the model the server was started with
    suite: str | None = None
    benchmarks: tuple[str, ...] = ()
    data_root: str | None = None
    max_samples: int | None = None
    allow_outside_root: bool = False
    include: tuple[str, ...] = ()  # benchmark folders (as --include), added to the server's registry
    output_dir: str | None = None  # default: runs/<model name> under the server's working directory
    frames: Mapping[str, Any] = field(default_factory=dict)  # FrameOverrides fields
    sampling: Mapping[str, Any] = field(default_factory=dict)  # SamplingParams fields
    thinking: bool = False
    mode: str = "auto"
    retry_failed: bool = False
    concurrency: int | None = None  # default: the server's

    @classmethod
    def from_json(cls, data: Any) -> JobSpec:
        """A spec from a request body; UserError (HTTP 400) for unknown keys, wrong types and bad values."""
        if not isinstance(data, Mapping):
            raise UserError("a job is a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown job field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        values = dict(data)
        for key in ("benchmarks", "include"):
            raw = values.get(key) or ()
            items = raw.split(",") if isinstance(raw, str) else raw
            if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) for x in items):
                raise UserError(f"job field {key} must be a list of strings")
            values[key] = tuple(x.strip() for x in items if x.strip())
        spec = cls(**values)
        spec.check()
        return spec

    def check(self) -> None:
        if not self.suite and not self.benchmarks:
            raise UserError("say what to evaluate: a suite or benchmarks")
        for name in ("model", "suite", "data_root", "output_dir"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise UserError(f"job field {name} must be a string")
        for name, low in (("max_samples", 1), ("concurrency", 1)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise UserError(f"job field {name} must be an integer >= {low}, got {value!r}")
            _in_range(name, value)
        if self.mode not in MODES or self.mode == "preprocess":
            raise UserError(f"job field mode must be one of {', '.join(m for m in MODES if m != 'preprocess')}")
        self.frame_overrides()
        self.sampling_params()

    def frame_overrides(self) -> FrameOverrides:
        return _build(FrameOverrides, self.frames, "frames")

    def sampling_params(self) -> SamplingParams:
        return _build(SamplingParams, self.sampling, "sampling")

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v)
                for k, v in dataclasses.asdict(self).items()}

    def run_config(self, base: RunConfig) -> RunConfig:
        """`base` (the server's settings: backend, engine, server, cache) with what this job asks for."""
        return dataclasses.replace(
            base,
            model=self.model or base.model,
            selection=Selection(suite=self.suite, benchmarks=self.benchmarks or None,
                                data_root=Path(self.data_root) if self.data_root else None,
                                max_samples=self.max_samples, allow_outside_root=self.allow_outside_root),
            output_dir=Path(self.output_dir) if self.output_dir else None,
            mode=self.mode,
            thinking=self.thinking,
            sampling=self.sampling_params(),
            frame_overrides=self.frame_overrides().to_dict(),
            concurrency=self.concurrency or base.concurrency,
            retry_failed=self.retry_failed,
            progress=False,
            shard=None,
        )


def _build(cls: type, values: Any, what: str) -> Any:
    if not isinstance(values, Mapping):
        raise UserError(f"job field {what} must be an object")
    bad = [k for k, v in values.items() if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))]
    if bad:  # every frame and sampling setting is a number
        raise UserError(f"job field {what}: {', '.join(map(str, bad))} must be number(s)")
    for name, value in values.items():
        _in_range(f"{what}.{name}", value)
    try:
        return cls(**values)
    except TypeError as exc:
        names = ", ".join(f.name for f in dataclasses.fields(cls))
        raise UserError(f"job field {what}: {exc} (fields: {names})") from None


def _in_range(name: str, value: Any) -> None:
    """A finite number within its cap (`LIMITS` by the field's own name, else MAX_NUMBER either way)."""
    if value is None:
        return
    cap = LIMITS.get(name.rpartition(".")[2], MAX_NUMBER)
    if (isinstance(value, float) and not math.isfinite(value)) or not -MAX_NUMBER <= value <= cap:
        raise UserError(f"job field {name} must be a finite number of at most {cap}, got {value!r:.40}")


@dataclass
class Job:
    """The server's record of one job; `to_json` is what GET /jobs/ID returns."""

    spec: JobSpec
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    status: str = "queued"
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    run_dir: str | None = None
    total: int | None = None  # samples still to run when the job started (from the run's plan)
    lines_before: int = 0  # result lines in the run directory when it started
    summary: dict[str, Any] | None = None
    error: str | None = None
    cancel_requested: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def done_count(self) -> int | None:
        """Samples with a new result line since the job started (read from the run directory)."""
        if self.run_dir is None:
            return None
        return max(0, result_lines(Path(self.run_dir)) - self.lines_before)

    def to_json(self) -> dict[str, Any]:
        end = self.finished_at or time.time()
        return {
            "id": self.id, "status": self.status, "spec": self.spec.to_json(),
            "submitted_at": self.submitted_at, "started_at": self.started_at, "finished_at": self.finished_at,
            "wall_s": round(end - self.started_at, 3) if self.started_at else None,
            "run_dir": self.run_dir, "progress": {"done": self.done_count(), "total": self.total},
            "summary": self.summary, "error": self.error,
        }


def result_lines(run_dir: Path) -> int:
    """Lines in the run directory's result files (each finished sample appends one)."""
    total = 0
    for path in (run_dir / "results").glob("*.jsonl"):
        try:
            with path.open("rb") as f:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        except OSError:
            continue
    return total
