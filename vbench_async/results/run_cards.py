"""A run directory's own benchmark cards: the `--include` folders its manifest remembers.

`judge`, `leaderboard`, `compare` and `merge` read a run's benchmarks by id; a run of a user's card needs that card's
folder. The manifest's `run_config.selection.include` says where the run found its cards, so these commands find them
without being told, and say so before any engine starts when a folder (or a card) is gone.
"""

from __future__ import annotations

from pathlib import Path

from ..benchmarks.include import add_include
from ..benchmarks.registry import get_benchmark
from ..errors import UserError
from .manifest_record import Manifest, read_manifest_file
from .rundir import manifest_path


def _manifests(run_dir: Path) -> list[Manifest]:
    """The run's manifest and its shards' (those that exist); RecordError for one that cannot be read."""
    paths = [manifest_path(run_dir), *sorted(run_dir.glob("manifest.*.json"))]
    return [read_manifest_file(path) for path in paths if path.is_file()]


def recorded_includes(run_dir: Path) -> list[Path]:
    """The card folders the run's manifests (the run's, or its shards') recorded, in order, without repeats."""
    found: list[Path] = []
    for manifest in _manifests(Path(run_dir)):
        for folder in manifest.run_config.selection.include:
            if Path(folder) not in found:
                found.append(Path(folder))
    return found


def use_run_cards(run_dir: Path, benchmarks: list[str] | None = None, strict: bool = True) -> list[str]:
    """Register the run's recorded card folders and check that each of `benchmarks` (default: the manifest's) is
    known now. A card that is not: UserError naming it and its folder (before a judge engine starts), or with
    `strict` False, the same sentence returned among the problems (a leaderboard shows the other runs)."""
    run_dir = Path(run_dir)
    folders = recorded_includes(run_dir)
    gone = [f for f in folders if not f.is_dir()]
    present = [f for f in folders if f.is_dir()]
    if present:
        add_include(*present)
    ids = benchmarks if benchmarks is not None else _manifest_benchmarks(run_dir)
    problems = []
    for bid in ids:
        try:
            get_benchmark(bid)
        except UserError as exc:
            where = (f"; the run read its cards from {', '.join(map(str, gone))}, which is gone" if gone else
                     "; pass the folder of its card with --include DIR")
            if strict:
                raise UserError(f"{run_dir}: this run's benchmark {bid!r} has no card{where}") from exc
            problems.append(f"{run_dir}: this run's benchmark {bid!r} has no card{where}")
    return problems


def _manifest_benchmarks(run_dir: Path) -> list[str]:
    ids: list[str] = []
    for manifest in _manifests(run_dir):
        ids += [bid for bid in manifest.benchmarks if bid not in ids]
    return ids
