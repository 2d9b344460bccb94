"""Benchmarks: declarative cards (top-level `benchmarks/*.yaml`), their two annotation sources, prompts and
official aggregations.

    list_benchmarks() -> list[str]
    get_benchmark("videomme") / get_benchmark("videomme@64f") -> Benchmark
    resolve_benchmarks(suite, names) -> list[Benchmark]
"""

from .cards import Card
from .registry import (
    Benchmark,
    get_benchmark,
    list_benchmarks,
    list_suites,
    load_suite,
    resolve_benchmarks,
    score_sample,
)

__all__ = [
    "Benchmark",
    "Card",
    "get_benchmark",
    "list_benchmarks",
    "list_suites",
    "load_suite",
    "resolve_benchmarks",
    "score_sample",
]
