"""What a command works on: a suite or a list of benchmarks, where their data lives, and how much of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SampleError
from ..samples import Sample
from .registry import Benchmark, resolve_benchmarks


@dataclass(frozen=True)
class Selection:
    """The fields' `help` is their command-line text (`cli/options.py`)."""

    suite: str | None = field(default=None, metadata={
        "help": "suite name (demo, all, mc, grounding, long, reasoning; see `vbench-async list`) or a suite YAML file"})
    benchmarks: tuple[str, ...] | None = field(default=None, metadata={
        "help": "comma-separated benchmark ids, e.g. videomme@64f,mvbench", "comma_list": True})
    data_root: Path | None = field(default=None, metadata={
        "help": "folder holding the annotation files and video folders"})
    max_samples: int | None = field(default=None, metadata={
        "help": "only the first N records of each benchmark", "min": 1})
    allow_outside_root: bool = field(default=False, metadata={
        "help": "accept annotation paths that point outside the data root (absolute, ../, symlinks)"})
    # Folders of users' own cards (absolute): part of the selection, so a run's manifest remembers where its cards
    # live and `judge`, `leaderboard`, `compare` and `merge` find them. Its flag is `--include` (cli/include.py, where
    # `--help` reads it without importing the registry).
    include: tuple[Path, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.suite and not self.benchmarks

    def resolve(self) -> list[Benchmark]:
        return resolve_benchmarks(self.suite, list(self.benchmarks) if self.benchmarks else None)

    def samples(self, benchmark: Benchmark) -> list[Sample | SampleError]:
        """The benchmark's records as samples (malformed ones as their error), the first `max_samples` of them."""
        samples = benchmark.load_samples(self.data_root)
        return samples[: self.max_samples] if self.max_samples is not None else samples
