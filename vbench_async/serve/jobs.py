"""An evaluation job of the server: what a client may ask for (`JobSpec`: the JSON form of `RunConfig`, the fields a
job may set) and what the server tells it back (`Job`: status, progress, run directory, summary; as JSON, the
`JobRecord` a client reads back).

A job asks for what `vbench-async run` would evaluate, in `RunConfig.to_json()`'s shape (selection, frames, prompts,
sampling, output, judge; the model, by default the server's); how the model is served (backend, engine, server URL)
and the frame cache are the server's own settings (`job` False in their metadata): a job naming one is refused with
its name, never run without it.
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

from ..errors import UserError
from ..evaluation.run_config import RunConfig
from ..record_io import OutputRecord, always
from ..results.manifest_record import RecordedRunConfig

STATUSES = ("queued", "running", "done", "failed", "cancelled")
# Caps far above any real setting: one job must not stall the serial queue or the machine (400,000 requests in
# flight took 27 s and 330 MB before the first was sent). A field not named here is held to MAX_NUMBER; the frame
# settings carry their caps in their declaration (frames/frame_settings.py), the flags' and cards' too.
LIMITS = {"concurrency": 4096, "max_samples": 100_000_000, "max_tokens": 1 << 20, "top_k": 1 << 20,
          "repetition_penalty": 100, "presence_penalty": 100}
MAX_NUMBER = 1 << 53  # beyond it a JSON number is not exact in every client
FINISHED = ("done", "failed", "cancelled")


def server_owned() -> tuple[str, ...]:
    """RunConfig's fields a job may not set: the server's (backend, engine, cache, ...) and the process's own."""
    return tuple(f.name for f in dataclasses.fields(RunConfig)
                 if f.metadata.get("job") is False or f.metadata.get("local"))


@dataclass(frozen=True)
class JobSpec:
    """One evaluation request: a part of `RunConfig.to_json()`. Paths are the server's: a client on the same machine
    sends them absolute."""

    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> JobSpec:
        """A spec from a request body; UserError (HTTP 400) for unknown or server-owned fields, wrong types and bad
        values, each named."""
        if not isinstance(data, Mapping):
            raise UserError("a job is a JSON object (RunConfig's JSON form)")
        spec = cls(dict(data))
        _numbers_in_range(spec.settings)
        cfg = spec.run_config(RunConfig(model="the server's model"))
        if cfg.selection.empty:
            raise UserError("say what to evaluate: selection.suite or selection.benchmarks")
        if cfg.mode == "preprocess":
            raise UserError("job field mode must be auto, eval or both (a server evaluates; `vbench-async "
                            "preprocess` fills the cache)")
        return spec

    def to_json(self) -> dict[str, Any]:
        return dict(self.settings)

    def describe(self) -> str:
        selection = RecordedRunConfig.of(dict(self.settings)).selection
        return selection.suite or ",".join(selection.benchmarks or ())

    def run_config(self, base: RunConfig) -> RunConfig:
        """`base` (the server's settings: model, backend, engine, server, cache, concurrency) with what this job asks
        for; the job's fields are checked as `RunConfig.from_json` checks them."""
        refused = sorted(set(self.settings) & set(server_owned()))
        if refused:
            raise UserError(f"job field(s) {', '.join(refused)} are the server's own settings, not a job's: start "
                            "the server with them (`vbench-async serve --help`)")
        merged = _overlay(base.to_json(), self.settings)  # unknown fields are refused here, by name
        return dataclasses.replace(RunConfig.from_json(merged), progress=False, shard=None)


def _overlay(base: dict[str, Any], job: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `job`'s values; nested settings field by field (a job's `sampling: {max_tokens: 8}` keeps the
    other sampling fields: unset, so a recipe's value or the default; the key present sets max_tokens, whatever its
    value)."""
    out = dict(base)
    for key, value in job.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _overlay(out[key], value)
        else:
            out[key] = value
    return out


def _numbers_in_range(values: Mapping[str, Any], where: str = "") -> None:
    """Every number of a job (nested settings included) within its cap (`_in_range`)."""
    for key, value in values.items():
        name = f"{where}.{key}" if where else str(key)
        if isinstance(value, Mapping):
            _numbers_in_range(value, name)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            _in_range(name, value)


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
    site: str | None = None  # the run's own index.html, written by the server once no job follows (clients write none)
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
        return JobRecord(
            id=self.id, status=self.status, spec=self.spec.to_json(),
            submitted_at=self.submitted_at, started_at=self.started_at, finished_at=self.finished_at,
            wall_s=round(end - self.started_at, 3) if self.started_at else None,
            run_dir=self.run_dir, progress=JobProgress(done=self.done_count(), total=self.total),
            summary=self.summary, site=self.site, error=self.error,
        ).to_json()


@dataclass
class JobProgress(OutputRecord):
    done: int | None = always()  # samples with a new result line (None: the job has no run directory yet)
    total: int | None = always()  # samples to run (None: not planned yet)


@dataclass
class JobRecord(OutputRecord):
    """A job as the server reports it (GET /jobs/ID, and the answers to a submit or cancel): `Job.to_json` writes
    it, a client (`run --server`) reads it back. Every key is written, null when not known yet."""

    id: str | int = always("")  # the server's are strings; an int is a caller's own
    status: str = always("queued")
    spec: dict[str, Any] = always(default_factory=dict)  # JobSpec.to_json()
    submitted_at: float | None = always()
    started_at: float | None = always()
    finished_at: float | None = always()
    wall_s: float | None = always()
    run_dir: str | None = always()
    progress: JobProgress = always(default_factory=JobProgress)
    summary: dict[str, Any] | None = always()  # summary.json's content once the run ended (`Summary.from_json`)
    site: str | None = always()  # the run's index.html, when the server writes it
    error: str | None = always()


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
