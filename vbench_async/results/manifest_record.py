"""manifest.json as declared records: how a run's numbers were produced (model identity, backend, per-benchmark
config and templates, versions, hardware, times, the judge). Read with `read_manifest_file`; written by
`results/manifest.py`. How they are read and written: `record_io.py`.

The parts that are other declarations' JSON stay mappings here: the run configuration (`RunConfig`'s own JSON, of
which only the keys other commands read back are declared), the sampling settings and the backend's
self-description. A benchmark's result config (what its config hash covers) is `result_config.ResultConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record_io import OutputRecord, read_record
from .result_config import RecipeIdentity, RecordedFrames, RecordedSampling, ResultConfig


@dataclass
class ModelIdentity(OutputRecord):
    name: str | None = None
    path: str | None = None
    family: str | None = None
    fingerprint: str | None = None
    revision: str | None = None  # a hub snapshot's commit
    parameters: int | None = None
    # Facts a manifest may carry for the leaderboard's model columns (else read from the checkpoint's config.json).
    language_model: str | None = None
    vision_encoder: str | None = None
    recipe: str | None = None


@dataclass
class BackendRecord(OutputRecord):
    """The backend's name and options; the rest (what the engine reported about itself) stays in `extra`."""

    name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class GpuInfo(OutputRecord):
    name: str | None = None
    memory_bytes: int | None = None


@dataclass
class Hardware(OutputRecord):
    machine: str | None = None
    cpus: int | None = None
    platform: str | None = None
    cpu_model: str | None = None
    memory_bytes: int | None = None
    cpus_usable: int | None = None
    cuda: str | None = None
    gpus: list[GpuInfo | str] = field(default_factory=list)


@dataclass
class JudgeRecord(OutputRecord):
    """An LLM judge's identity: an entry of judge/judge.json (`verdict_record.JudgeState`), and the manifest's "judge"
    (the active entry). Declared in the order a judge pass writes them (`verdicts.JudgeIdentity.to_dict`)."""

    model: str | None = None
    fingerprint: str | None = None
    backend: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    prompt_hash: str | None = None
    judge_id: str | None = None
    key: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


@dataclass
class RunSelection(OutputRecord):
    suite: str | None = None
    benchmarks: list[str] | None = None
    include: list[str] = field(default_factory=list)  # the card folders the run read (`results/run_cards.py`)
    max_samples: int | None = None
    data_root: str | None = None


@dataclass
class RecordedPrompt(OutputRecord):
    prompt_variant: str | None = None


@dataclass
class RecordedRunConfig(OutputRecord):
    """The run's settings as written (`plain(RunConfig)`): the keys read back are declared, the others kept."""

    selection: RunSelection = field(default_factory=RunSelection)
    cache_dir: str | None = None
    shard: list[int] | None = None  # [K, N]: shard K of N
    backend: str | None = None
    sampling: RecordedSampling = field(default_factory=RecordedSampling)  # every field: the run's, not the user's
    thinking: bool | None = None
    prompt: RecordedPrompt = field(default_factory=RecordedPrompt)


@dataclass
class BenchmarkManifest(OutputRecord):
    config: ResultConfig | None = None  # what the config hash covers
    config_hash: str | None = None
    results_file: str | None = None
    frames: RecordedFrames | None = None  # FrameSpec.to_dict()
    prompt_variant: str | None = None
    prompt_template_hash: str | None = None
    prompt_templates: dict[str, Any] = field(default_factory=dict)
    aggregation: Any = None
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Manifest(OutputRecord):
    manifest_version: int | None = None
    model: ModelIdentity = field(default_factory=ModelIdentity)
    backend: BackendRecord = field(default_factory=BackendRecord)
    sampling: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    thinking: Any = None
    prompt_variant: str | None = None
    recipe: RecipeIdentity | None = None  # the run's evaluation recipe; None: the cards' own settings
    run_config: RecordedRunConfig = field(default_factory=RecordedRunConfig)
    benchmarks: dict[str, BenchmarkManifest] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    throughput: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    git_commit: str | None = None
    hardware: Hardware = field(default_factory=Hardware)
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    judge: JudgeRecord | None = None
    rechecked_at: list[str] = field(default_factory=list)
    shards: list[dict[str, Any]] = field(default_factory=list)  # a merged run: each shard's timing and provenance


def read_manifest_file(path: Path) -> Manifest:
    """manifest.json (or a shard's) as a record; RecordError when it is unreadable, not JSON, not a mapping or a
    field has the wrong type; FileNotFoundError when there is none."""
    return read_record(Manifest, path)
