"""What a plan learns from a model's processor, kept on disk so that the next plan of the same model reads it instead
of loading transformers and the processor (importing them cost a plan of 100,000 questions over 4 s of its 10).

The values are the processor's own answers (the chat template's frame per media layout, the placeholder ids, the
visual token counts per video geometry and image size, the model's limits, the fast tokenizer's serialized state),
and the family's frame indices (torch's linspace for the Qwen families: a warm plan then imports no torch either),
stored under a key made of everything that computed them: every file of the model directory but its weights (in
full), the model's fingerprint, the family, the versions of the libraries that answer, and the source of this
package's modules that ask (families/, workload/, the chat messages of backends/base.py). Anything not yet known, or
known under another key, is asked of the processor, loaded then, and added. Kept next to the video headers under the
frame cache (probe.py); a damaged file is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, TypeVar, cast

from ..frames.layout import write_text_atomic
from ..record_io import OutputRecord, RecordError, always, read_record

MEMO_VERSION = 1  # bump when what is stored changes
MAX_ROWS = 1 << 15  # answers kept per table
_LIBRARIES = ("transformers", "tokenizers", "jinja2", "torch", "torchvision", "huggingface_hub", "numpy")
_SOURCES = ("families", "workload", "backends/base.py")  # under vbench_async/
_WEIGHTS = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx"}

T = TypeVar("T")


def memo_key(model_path: str, fingerprint: str, family: str) -> str:
    """A digest of every input of the stored answers (see the module docstring)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{MEMO_VERSION}\0{fingerprint}\0{family}\0".encode())
    for name in _LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{name}={version}\0".encode())
    package = Path(__file__).resolve().parents[1]
    for source in _SOURCES:
        path = package / source
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f"{f.relative_to(package).as_posix()}\0".encode())
            h.update(f.read_bytes())
    local = Path(model_path)
    if local.is_dir():  # a hub id: its fingerprint names the revision
        for f in sorted(p for p in local.rglob("*") if p.is_file() and p.suffix not in _WEIGHTS):
            rel = f.relative_to(local).as_posix()
            if rel.startswith(".") or "/." in rel:  # download metadata and the like (models.fingerprint_dir too)
                continue
            h.update(f"{rel}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@dataclass
class MemoFile(OutputRecord):
    """The memo file: its format version and its tables (table -> key -> JSON value)."""

    version: int | None = always()  # None: a file without one, not read
    tables: dict[str, Any] = always(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> dict[str, dict[str, Any]]:
        """The tables of the file at `path` (a table that is not a mapping is damaged: dropped); none when the file is
        absent, damaged or of another version."""
        try:
            stored = read_record(cls, path)
        except (OSError, RecordError):  # absent or damaged: ask again
            return {}
        if stored.version != MEMO_VERSION:
            return {}
        return {k: v for k, v in stored.tables.items() if isinstance(v, dict)}


class ProcessorMemo:
    """Tables of answers (table -> key -> JSON value), read from and written to one file; without a file, kept in
    memory only."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self.tables: dict[str, dict[str, Any]] = {}
        self.changed = False
        if path is not None:
            self.tables = MemoFile.read(path)

    @classmethod
    def at(cls, folder: Path, model_path: str, fingerprint: str, family: str) -> ProcessorMemo:
        """The memo of this model in `folder`: one file per model and key (the older keys' files of the model are
        removed when this one is written: a new release would otherwise leave a tokenizer copy per release)."""
        model = hashlib.blake2b(f"{fingerprint}\0{family}".encode(), digest_size=8).hexdigest()
        return cls(Path(folder) / f"processor-{model}-{memo_key(model_path, fingerprint, family)}.json")

    def answer(self, table: str, key: str, compute: Callable[[], T]) -> T:
        """The stored answer, or `compute()`'s, stored. Answers must survive JSON as they are (ints, strings, lists
        of them, None): callers convert tuples back."""
        rows = self.tables.setdefault(table, {})
        if key not in rows:
            if len(rows) >= MAX_ROWS:  # plans of many different suites: stay bounded
                rows.clear()
            rows[key] = compute()
            self.changed = True
        return cast(T, rows[key])

    @property
    def tokenizer_file(self) -> Path | None:
        """Where the fast tokenizer's serialized state is kept (tokenizer.json format)."""
        return self.path.with_name(self.path.stem + ".tokenizer.json") if self.path is not None else None

    def save(self) -> None:
        """Write what was added (atomic; a read-only cache keeps working, it just asks again next time)."""
        if self.path is None or not self.changed:
            return
        try:
            write_text_atomic(self.path, json.dumps(MemoFile(version=MEMO_VERSION, tables=self.tables).to_json()))
            self.changed = False
            model = self.path.name.rsplit("-", 1)[0]  # processor-<model>
            for old in self.path.parent.glob(f"{model}-*.json"):
                if not old.name.startswith(self.path.stem):
                    old.unlink(missing_ok=True)
        except OSError:
            pass
