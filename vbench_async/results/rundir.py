"""The run directory's file names and its JSON files: the one place that spells them, writes them and reads them.

    RUN_DIR/results/<benchmark>.<config hash>[.shard-K-of-N].jsonl    result lines (results/result_file.py)
    RUN_DIR/results/<benchmark>.<config hash>.shards-N.json           a sharded run's sample index
    RUN_DIR/shards/                                                    the pinned shard plans (sharding.py)
    RUN_DIR/judge/                                                     LLM-judge verdicts (results/verdicts.py)
    RUN_DIR/summary[.shard-K-of-N].json, manifest[.shard-K-of-N].json
    RUN_DIR/leaderboard/index.html                                     the run's own site
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..redact import scrub

if TYPE_CHECKING:
    from .manifest_record import Manifest
    from .summary_record import Summary

RESULTS_DIRNAME = "results"
PLAN_DIRNAME = "shards"
JUDGE_DIRNAME = "judge"
SITE_DIRNAME = "leaderboard"
SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"

ShardId = tuple[int, int]  # (K, N): shard K of N


def shard_tag(shard: ShardId) -> str:
    """The file-name part of shard K of N: "shard-0-of-4"."""
    return f"shard-{shard[0]}-of-{shard[1]}"


def safe_name(benchmark_id: str) -> str:
    """File-system safe form of a benchmark id ("videomme@64f" -> "videomme@64f", "a/b" -> "a_b")."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in benchmark_id)


def results_path(run_dir: Path, benchmark_id: str, config_hash: str, shard: ShardId | None = None) -> Path:
    tag = f".{shard_tag(shard)}" if shard else ""
    return Path(run_dir) / RESULTS_DIRNAME / f"{safe_name(benchmark_id)}.{config_hash}{tag}.jsonl"


def shard_index_path(run_dir: Path, benchmark_id: str, config_hash: str, count: int) -> Path:
    """Where a sharded run lists every sample of a benchmark with its shard (what `merge` checks against)."""
    return Path(run_dir) / RESULTS_DIRNAME / f"{safe_name(benchmark_id)}.{config_hash}.shards-{count}.json"


def output_name(name: str, shard: ShardId | None) -> str:
    """summary.json -> summary.shard-0-of-4.json for a shard."""
    if not shard:
        return name
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.{shard_tag(shard)}.{suffix}"


def summary_path(run_dir: Path, shard: ShardId | None = None) -> Path:
    return Path(run_dir) / output_name(SUMMARY_FILE, shard)


def manifest_path(run_dir: Path, shard: ShardId | None = None) -> Path:
    return Path(run_dir) / output_name(MANIFEST_FILE, shard)


def site_dir(run_dir: Path) -> Path:
    return Path(run_dir) / SITE_DIRNAME


def site_log_path(run_dir: Path) -> Path:
    """Where a site built in the background says what it did; its last line is `leaderboard of ...` once done."""
    return Path(run_dir) / "logs" / "site.log"


def has_site(run_dir: Path) -> bool:
    """The run directory has its own site, or a build of it was started (one still running in the background has
    written no index.html yet, and a command that changes the results must not skip the rebuild for that: builds
    into one folder take turns and each reads the results once it has the folder, so the last one is current)."""
    return (site_dir(run_dir) / "index.html").exists() or site_log_path(run_dir).exists()


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON, atomically (a reader sees the old file or the new one, never half of one);
    scrubbed of secrets (redact.scrub: a manifest's URL, a summary's messages)."""
    data = scrub(data)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # unique: writers may race
    try:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written temporary file behind


def read_json(path: Path) -> Any:
    """The parsed file, or None when it does not exist; UserError when it is not valid JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise UserError(f"{path} is nested too deeply to be a vbench-async file") from None


def read_summary(run_dir: Path, shard: ShardId | None = None) -> Summary:
    """The run's summary; UserError (RecordError) when the folder is not a result directory or the file cannot be
    read as a summary."""
    from .summary_record import read_summary_file

    path = summary_path(run_dir, shard)
    try:
        return read_summary_file(path)
    except FileNotFoundError:
        raise UserError(f"{Path(run_dir)} is not a result directory (no {path.name}); evaluate a model into it "
                        "first") from None


def read_manifest(run_dir: Path, shard: ShardId | None = None) -> Manifest | None:
    """The run's manifest, or None when it has none; RecordError when it cannot be read as a manifest."""
    from .manifest_record import read_manifest_file

    try:
        return read_manifest_file(manifest_path(run_dir, shard))
    except FileNotFoundError:
        return None


# What a run that stopped before its first result leaves behind: its lock file and its logs.
_SCAFFOLDING = (".run.lock", "logs")


def discard_if_unused(run_dir: Path, also_empty_parent: bool = False) -> bool:
    """Remove a run directory holding nothing but the scaffolding a run sets up before its first result (a run that
    stopped on a usage error); `also_empty_parent`: its parent too when that is left empty. True if removed."""
    import shutil

    run_dir = Path(run_dir)
    if not run_dir.is_dir() or any(p.name not in _SCAFFOLDING for p in run_dir.iterdir()):
        return False
    shutil.rmtree(run_dir)
    if also_empty_parent and run_dir.parent.is_dir() and not any(run_dir.parent.iterdir()):
        run_dir.parent.rmdir()
    return True
