"""The cache key as a function of what an entry records (keys.py computes it for a video; entry_sum.py checks it)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .video import FORMAT_VERSION


def key_of(video_fingerprint: str, spec_fields: dict[str, Any], window: tuple | None) -> str:
    """32 hex chars over (format version, content fingerprint, FrameSpec.key_fields(), normalized window)."""
    payload = {"format": FORMAT_VERSION, "video": video_fingerprint, "spec": spec_fields, "window": window}
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=16).hexdigest()
