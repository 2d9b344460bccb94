"""Which model: resolve a `--model` argument to a directory (or hub id), its family, and a content fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import families
from .errors import UserError


@dataclass(frozen=True)
class ModelRef:
    name: str  # as the user wrote it (tiny-qwen2.5-vl, a path, or a hub id)
    path: str  # local directory or hub id, what engines load
    family: str
    fingerprint: str  # content hash of a local dir, or "hub:<id>@<revision>"
    label: str | None = None  # the user's name for it (`run --name`): the summary's model and the run directory
    # FrameSpec fields the checkpoint's config decides (e.g. a fixed-size family's frame side), as sorted pairs
    frame_settings: tuple[tuple[str, int], ...] = ()

    @property
    def random_weights(self) -> bool:
        """A built-in tiny model (`tiny-*`): random weights, so its answers are noise and its scores near 0."""
        return self.name.startswith("tiny-")

    @property
    def display_name(self) -> str:
        if self.label:
            return self.label
        p = Path(self.path)
        if self.name.startswith(("tiny-", "seeing-")):
            return self.name
        # "checkpoint-200" alone says nothing: prefix its parent, as users name runs that way.
        if p.name.startswith(("checkpoint", "global_step")) and p.parent.name:
            return f"{p.parent.name}_{p.name}"
        return p.name or self.name


def resolve(model: str) -> ModelRef:
    from .demo.tiny_models import resolve_model

    path = resolve_model(model)  # builds tiny-* models on first use; UserError for unknown names / missing paths
    local = Path(path)
    if local.is_dir():
        cfg_file = local / "config.json"
        if not cfg_file.exists():
            raise UserError(f"{local} has no config.json: not a Hugging Face model directory")
        config = families.model_config(str(local))
        fingerprint = fingerprint_dir(local)
    else:
        config = families.model_config(str(path))
        fingerprint = f"hub:{path}@{hub_revision(str(path))}"
    family = families.for_config(config, model)  # config.json's model_type decides, never the name
    settings = families.frame_settings(family, config, model)
    return ModelRef(name=model, path=str(path), family=family.name, fingerprint=fingerprint,
                    frame_settings=tuple(sorted(settings.items())))


def family_ref(family: str) -> ModelRef:
    """A model known only by its family (`preprocess --family`): no checkpoint, so no frame setting of its own."""
    if family not in families.names():
        raise UserError(f"unknown model family {family!r}; known: {', '.join(families.names())}")
    return ModelRef(name=family, path=family, family=family, fingerprint=f"family:{family}")


def fingerprint_dir(directory: Path) -> str:
    """Hash of file names, sizes and the head and tail of each file: changes when weights change, costs milliseconds."""
    h = hashlib.blake2b(digest_size=12)
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = f.relative_to(directory).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(1 << 20))
            if size > 2 << 20:
                fh.seek(-(1 << 20), 2)
                h.update(fh.read(1 << 20))
    return h.hexdigest()


def hub_revision(repo_id: str) -> str:
    """The commit of the hub model the engines will load: the cached snapshot's, else the hub's current one (so a
    re-uploaded checkpoint gets a new config hash); "unknown" when neither can be read (offline, not cached)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(repo_id, "config.json")
        if isinstance(cached, str):
            return Path(cached).parent.name  # .../snapshots/<commit>/config.json
        from huggingface_hub import HfApi

        return HfApi().model_info(repo_id).sha or "unknown"
    except Exception:  # noqa: BLE001 - offline, gated, or an old huggingface_hub: the id alone still identifies it
        return "unknown"


def parameter_count(directory: str | Path) -> int | None:
    """Parameters of a local checkpoint, read off its safetensors headers (no tensor is loaded); None when the
    directory holds no safetensors file (a hub id, another format)."""
    import json
    import math

    total, found = 0, False
    local = Path(directory)
    if not local.is_dir():
        return None
    for f in sorted(local.glob("*.safetensors")):
        try:
            with open(f, "rb") as fh:
                size = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(size)) if 0 < size < 100_000_000 else {}
        except (OSError, ValueError):
            return None
        for name, info in header.items():
            if name != "__metadata__" and isinstance(info, dict):
                total += math.prod(info.get("shape") or [1])
                found = True
    return total if found else None
