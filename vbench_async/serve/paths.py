"""Which paths a server job may touch: only those the server's own configuration allows.

A job runs as the server's user, so a job that could name any folder could make the server read (a data root, card
folders, a suite file) and write (its run directory) wherever that user can. `JobPaths` holds what `vbench-async
serve` was started with: an output root (run directories go under it), data roots and card folders (a job's
`data_root`, `include` folders and suite file must be one of them or inside one), model folders (a job's `model` or
judge model, when it names a local folder, must be inside one: the server's own model, the built tiny models,
`--model-root`), and whether a job may read annotation paths outside its data root. A job's run directory must
also be one a run wrote (or new, or empty): a user's own `summary.json`, `manifest.json` or `leaderboard/` there is
never replaced. Refusals name the path and the server option that would allow it, never a file's contents.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import UserError
from ..results.rundir import JUDGE_DIRNAME, MANIFEST_FILE, PLAN_DIRNAME, RESULTS_DIRNAME, SITE_DIRNAME, SUMMARY_FILE

if TYPE_CHECKING:
    from ..backends.factory import BackendKind

# What a run writes at the top of its run directory (results/rundir.py, the result store's lock, the logs).
_RUN_DIRS = {RESULTS_DIRNAME, PLAN_DIRNAME, JUDGE_DIRNAME, SITE_DIRNAME, "logs"}
_RUN_FILE = re.compile(r"(summary|manifest)(\.shard-\d+-of-\d+)?\.json|\.run\.lock|\.(summary|manifest)[^/]*\.tmp")
_SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_@+-]*")  # a suite's name, not a path
MAX_MANIFEST = 64 << 20  # a run's manifest is kilobytes to a few megabytes


class PathRefused(UserError):
    """A job names a path the server's configuration does not allow (HTTP 403)."""


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _models_home() -> Path:
    """Where the built tiny-* models live (the vbench home's model cache): a folder of this tool's own."""
    from ..demo.tiny_models import models_home

    return models_home()


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


@dataclass(frozen=True)
class JobPaths:
    """The folders a server's jobs may use (absolute, resolved). `output_root`: run directories go under it;
    `data_roots`: a job's `selection.data_root` must be one of them (or a folder inside one); `include_roots`: a job's
    card folders and suite file likewise; `model_roots`: a job's model (and in-process judge model) that names a
    local folder must be inside one (a tiny-* name or a hub id names none); `allow_outside_root`: whether a job may
    set `allow_outside_root`."""

    output_root: Path
    data_roots: tuple[Path, ...] = ()
    include_roots: tuple[Path, ...] = ()
    allow_outside_root: bool = False
    model_roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, output_root: str | Path | None = None, data_roots: Iterable[str | Path] = (),
           include_roots: Iterable[str | Path] = (), allow_outside_root: bool = False,
           model_roots: Iterable[str | Path] = ()) -> JobPaths:
        """Resolved now (the server's working directory): `output_root` defaults to ./runs; the built tiny models'
        folder is always a model root (`with_model` adds the server's own model)."""
        models = tuple(dict.fromkeys(_resolved(p) for p in (*model_roots, _models_home())))
        return cls(_resolved(output_root if output_root is not None else Path("runs")),
                   tuple(_resolved(p) for p in data_roots), tuple(_resolved(p) for p in include_roots),
                   allow_outside_root, models)

    def with_model(self, model: str) -> JobPaths:
        """These paths with the server's own model folder allowed (when its model is a local folder): a job may always
        name the model the server was started with."""
        try:
            local = _local_model(model)
        except ValueError:  # a path that cannot be resolved: loading it fails, whoever names it
            return self
        if local is None or local in self.model_roots:
            return self
        return dataclasses.replace(self, model_roots=(*self.model_roots, local))

    def describe(self) -> dict[str, Any]:
        return {"output_root": str(self.output_root), "data_roots": [str(p) for p in self.data_roots],
                "include_roots": [str(p) for p in self.include_roots],
                "model_roots": [str(p) for p in self.model_roots]}

    def check(self, cfg: Any, kind: BackendKind) -> None:
        """Refuse (PathRefused) a job's RunConfig that names a path outside what the server allows. `kind`: the
        server's backend kind (every job's)."""
        sel = cfg.selection
        if sel.allow_outside_root and not self.allow_outside_root:
            raise PathRefused("job field selection.allow_outside_root is refused: this server reads annotation "
                              "paths inside the data root only (start it with --allow-outside-root to allow it)")
        if sel.data_root is not None and not _inside(_resolved(sel.data_root), self.data_roots):
            raise PathRefused(f"job field selection.data_root {str(sel.data_root)!r} is not one of this server's "
                              f"data roots ({_shown(self.data_roots)}); start the server with --data-root DIR")
        for folder in sel.include:
            if not _inside(_resolved(folder), self.include_roots):
                raise PathRefused(f"job field selection.include {str(folder)!r} is not one of this server's card "
                                  f"folders ({_shown(self.include_roots)}); start the server with --include DIR")
        suite = sel.suite
        if suite and not _SUITE_NAME.fullmatch(suite):  # a suite file: inside a card folder or a data root
            allowed = (*self.include_roots, *self.data_roots, *(_resolved(f) for f in sel.include))
            if not _inside(_resolved(suite), allowed):
                raise PathRefused(f"job field selection.suite {suite!r} is a file outside this server's card folders "
                                  "and data roots; put it in a folder given to the server with --include DIR")
        self.check_model(cfg.model, "model")
        if cfg.judge_model:
            if kind.in_process:  # a served judge (openai) is a name the server answers to
                self.check_model(cfg.judge_model, "judge_model")
        if cfg.output_dir is not None:
            self.check_run_dir(Path(cfg.output_dir))

    def check_model(self, model: str, field: str = "model") -> None:
        """Refuse a model that names a local folder (or file, or a path that does not exist: no existence oracle)
        outside the model roots: loading it reads its config.json and weights as the server's user, and an error
        could quote them. A tiny-* name or a hub id is allowed."""
        try:
            local = _local_model(model)
            allowed = local is None or _inside(local, self.model_roots)
        except ValueError:
            allowed = False
        if not allowed:
            raise PathRefused(f"job field {field} {model!r:.300} is a local path outside this server's model folders "
                              f"({_shown(self.model_roots)}); start the server with --model-root DIR (a tiny-* "
                              "model or a hub id needs none)")

    def check_suite(self, suite: str | None) -> None:
        """A suite given by name (checked with the job's card folders known) is a suite's name, never a file in the
        server's working directory."""
        from ..benchmarks.registry import suite_files

        if suite and _SUITE_NAME.fullmatch(suite) and suite not in suite_files():
            raise UserError(f"unknown suite {suite!r}: a job names a suite (`vbench-async list`) or a suite file "
                            "inside the server's card folders")

    def check_run_dir(self, run_dir: Path) -> None:
        """Refuse a run directory outside the output root, or one holding files no run wrote."""
        resolved = _resolved(run_dir)
        if not _inside(resolved, [self.output_root]):
            raise PathRefused(f"job field output_dir {str(run_dir)!r} is outside this server's output root "
                              f"{str(self.output_root)!r}; start the server with --output-root DIR")
        check_own_run_dir(resolved)


def _local_model(model: str) -> Path | None:
    """The resolved local folder a job's model names (links and `..` resolved), None for a tiny-* name or a hub id;
    ValueError for a path that cannot be resolved (a link loop, `~user` of no such user)."""
    from ..demo.tiny_models import local_model_path

    path = local_model_path(model)
    if path is None:
        return None
    try:
        return _resolved(path)
    except (OSError, RuntimeError) as exc:
        raise ValueError(model) from exc


def _shown(roots: tuple[Path, ...]) -> str:
    return ", ".join(str(p) for p in roots) if roots else "none"


def check_own_run_dir(run_dir: Path) -> None:
    """A job writes into a folder that is new, empty, or a run directory a run wrote (a job resumes it); a folder
    holding anything else (a user's summary.json, manifest.json or leaderboard, a link) is refused, never replaced."""
    try:
        entries = list(os.scandir(run_dir))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise PathRefused(f"job field output_dir {str(run_dir)!r} is not a folder") from None
    except OSError as exc:
        raise PathRefused(f"job field output_dir {str(run_dir)!r} cannot be read: {exc.strerror}") from None
    names = {e.name for e in entries}
    for entry in entries:
        kind = "folder" if entry.name in _RUN_DIRS else "file" if _RUN_FILE.fullmatch(entry.name) else None
        ok = kind == "folder" and entry.is_dir(follow_symlinks=False) or \
            kind == "file" and entry.is_file(follow_symlinks=False)
        if not ok:
            raise PathRefused(f"job field output_dir {str(run_dir)!r} holds {entry.name!r}, which no run wrote; "
                              "give the job a new folder (a job never replaces files it did not write)")
    written = {n for n in names if n.startswith(("summary", "manifest"))} | ({SITE_DIRNAME} & names)
    if written and not _is_run_manifest(run_dir / MANIFEST_FILE) and not any(
            _is_run_manifest(run_dir / n) for n in names if n.startswith("manifest.shard-")):
        shown = ", ".join(sorted(written))
        raise PathRefused(f"job field output_dir {str(run_dir)!r} holds {shown} but no manifest a run wrote; give the "
                          "job a new folder (a job never replaces files it did not write)")
    if SUMMARY_FILE in names and not _is_json_object(run_dir / SUMMARY_FILE, "benchmarks"):
        raise PathRefused(f"job field output_dir {str(run_dir)!r} holds a summary.json no run wrote; give the job a "
                          "new folder (a job never replaces files it did not write)")


def _is_run_manifest(path: Path) -> bool:
    return _is_json_object(path, "manifest_version", "run_config")


def _is_json_object(path: Path, *keys: str) -> bool:
    """Whether `path` is a regular file (not a link) holding a JSON object with `keys` (its text is never shown)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST:
            return False
        with open(path, "rb") as f:
            data = json.loads(f.read(MAX_MANIFEST))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)
