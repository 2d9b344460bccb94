"""Append-only, crash-safe result files: one JSONL per (run, benchmark, config), one line per sample.

Each line is flushed and fsynced before the next sample counts as done, so a SIGKILL loses at most the line being
written. A torn last line is cut off on the next open. Lines are keyed by `sample_id`; a resumed run skips exactly the
ids already present. The file name carries the config hash, so a changed config (model, frames, prompt, sampling)
writes a new file instead of mixing with old results. Shard K of N of a sharded run writes
`<benchmark>.<hash>.shard-K-of-N.jsonl` (no two processes share a file); `merge` combines them into the plain name.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass
from io import FileIO
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping, TextIO

from ..errors import UserError
from ..failure_kinds import environment_fault, is_final_kind
from ..redact import scrub
from ..sample_result import Result, failure_kind_of, is_invalid_record_line, record_problem
from .lines import BadLine, check_line, line_problem, read_lines
from .rundir import ShardId, results_path

log = logging.getLogger(__name__)


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable short hash of a JSON-serialisable config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


class StoreLocked(UserError):
    """Another process is writing the same result file (the CLI says so and exits 2, without a traceback)."""


@dataclass
class ResultStore:
    """Result file of one benchmark under one config, in `run_dir/results/`."""

    run_dir: Path
    benchmark_id: str
    config_hash: str
    shard: ShardId | None = None  # (K, N): shard K of N writes its own file, so shards never share one

    @property
    def path(self) -> Path:
        return results_path(self.run_dir, self.benchmark_id, self.config_hash, self.shard)

    def __post_init__(self) -> None:
        self._fh: FileIO | None = None
        self._lock_fh: TextIO | None = None

    # -- reading -----------------------------------------------------------------------------------------------------
    def failure_kinds(self) -> dict[str, str | None]:
        """Each sample's latest line as its error kind ("unknown" for an error without one), None where the model
        answered. Holds one short value per line while reading, never the lines (a resumed run of 100,000 samples
        keeps only their ids)."""
        return read_lines(self.path, view=failure_kind_of)

    def invalid_records(self) -> set[str]:
        """Ids whose latest line is the `record_invalid` line of a record that was not a sample (its stub's task type
        is `INVALID_TASK`), not that of a sample whose answer could not be scored."""
        return {sid for sid, stub in read_lines(self.path, view=is_invalid_record_line).items() if stub}

    def completed_ids(self, retry_failed: bool = False, kinds: Mapping[str, str | None] | None = None) -> set[str]:
        """Ids whose line settles them: without retry_failed, lines with a transient error are tried again.
        `kinds`: `failure_kinds()` when the caller has read them already."""
        kinds = self.failure_kinds() if kinds is None else kinds
        return {sid for sid, kind in kinds.items() if kind is None or (not retry_failed and is_final_kind(kind))}

    def drop_failures(self, ids: Collection[str]) -> int:
        """Remove the `record_invalid` lines of records that were not samples (`invalid_records`) among `ids` (records
        repaired since, whose new result is written), under the file's lock, atomically; every other line stays as
        written, byte for byte. Returns how many lines went."""
        if not ids or not self.path.exists():
            return 0
        opened = self._fh is None
        if opened:
            self.open()
        try:
            with open(self.path, "rb") as fh:
                lines = fh.readlines()
            kept = [line for line in lines if not _invalid_record_of(line, ids)]
            if len(kept) < len(lines):
                self._replace(kept)
        finally:
            if opened:
                self.close()
        return len(lines) - len(kept)

    # -- writing -----------------------------------------------------------------------------------------------------
    def open(self) -> ResultStore:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fh = open(self.path.with_suffix(".lock"), "a+")
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_fh.close()
            raise StoreLocked(f"{self.path} is being written by another process (a second run into the same output "
                              "directory?); wait for it to finish or choose another output directory") from exc
        _cut_torn_tail(self.path)
        self._fh = open(self.path, "ab", buffering=0)
        return self

    def append(self, result: Result | Mapping[str, Any]) -> None:
        """Write one line and fsync it. A line readers would reject raises InvalidResult; a full or read-only disk
        raises EnvironmentFault, with the file cut back to its last whole line (nothing half-written stays)."""
        self.write_lines([self.encode(result)])

    def encode(self, result: Result | Mapping[str, Any]) -> str:
        """The line `append` writes for `result` (InvalidResult when readers would reject it)."""
        line = _line(result.to_dict() if isinstance(result, Result) else result)
        check_line(line, self.path)
        return line

    def write_lines(self, lines: list[str]) -> None:
        """Append encoded lines with one write and one fsync (results/writer.py batches them); on a disk fault
        the file is cut back to where it was, so none of them is half there."""
        if self._fh is None:
            raise RuntimeError("open the store before writing to it")
        data = memoryview("".join(lines).encode("utf-8"))
        fd = self._fh.fileno()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass  # the next open cuts a torn tail anyway
            raise environment_fault("results file", self.path, exc) from exc

    def rewrite(self, results: Iterable[Mapping[str, Any]]) -> None:
        """Replace the whole file with `results` (merging shards), atomically; the store must be open (locked)."""
        self._replace(_line(r).encode("utf-8") for r in results)

    def _replace(self, lines: Iterable[bytes]) -> None:
        """Replace the whole file with `lines` (each ending in a newline), atomically; the store must be open."""
        if self._fh is None:
            raise RuntimeError("open the store before rewriting it")
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # not *.jsonl
        try:
            with open(tmp, "wb") as fh:
                fh.writelines(lines)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        self._fh.close()
        self._fh = open(self.path, "ab", buffering=0)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> ResultStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: Path, view: Callable[[Result], Result] | None = None,
                 problems: list[BadLine] | None = None) -> dict[str, Result]:
    """Valid results keyed by sample id, as `Result`s, through `lines.read_lines`, the one reader (invalid lines
    reported, left out). `view` reduces each as it is read (to what a caller needs), so a large file is never held
    whole."""
    def typed(line: dict[str, Any]) -> Result:
        r = Result.read(line)
        return view(r) if view is not None else r

    return read_lines(path, view=typed, problems=problems)


_IDENTITY = ("sample_id", "config_hash", "benchmark")  # what a resume matches lines by: written as it is


def _line(result: Mapping[str, Any]) -> str:
    # No secret at rest: a server's error quoting `Bearer KEY`, an output repeating a URL's password.
    result = {k: v if k in _IDENTITY else scrub(v) for k, v in result.items()}
    try:
        line = json.dumps(result, ensure_ascii=False, default=_json_default, allow_nan=False)
    except ValueError:  # NaN/inf somewhere in the details: store null, keep valid JSON for every reader
        result = _finite(result)
        line = json.dumps(result, ensure_ascii=False, default=_json_default, allow_nan=False)
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a server's "\ud800"): escape it, or the sample has no line
            line = json.dumps(result, ensure_ascii=True, default=_json_default, allow_nan=False)
    return line + "\n"


def _invalid_record_of(line: bytes, ids: Collection[str]) -> bool:
    """Whether a raw line is the `record_invalid` line of a record (not a sample) among `ids` (a line that does not
    parse is not)."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return False
    if record_problem(rec) is not None:
        return False
    return is_invalid_record_line(rec) and rec["sample_id"] in ids


def _cut_torn_tail(path: Path) -> None:
    """Make new lines start on a line boundary: a last line without its newline is completed when it is a whole
    valid line (only the newline was lost, or a hand edit dropped it), else cut off; either is logged with the
    file and line number."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return
        # Walk back to the last newline (lines are small; read the tail in blocks).
        pos, cut = size, 0
        while pos > 0:
            step = min(65536, pos)
            fh.seek(pos - step)
            block = fh.read(step)
            idx = block.rfind(b"\n")
            if idx >= 0:
                cut = pos - step + idx + 1
                break
            pos -= step
        fh.seek(0)
        lineno = fh.read(cut).count(b"\n") + 1
        fh.seek(cut)
        tail = fh.read()
        if _whole_line(tail, path):
            fh.write(b"\n")
            log.warning("%s:%d: the last line had no newline; it is whole, so it was kept and completed", path, lineno)
            return
        fh.truncate(cut)
        log.warning("%s:%d: cut a torn last line (%d bytes without a newline: a crash mid-write, or an edit)",
                    path, lineno, len(tail))


def _whole_line(tail: bytes, path: Path) -> bool:
    try:
        return line_problem(json.loads(tail.decode("utf-8", errors="replace")), path) is None
    except (ValueError, RecursionError):
        return False


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)
