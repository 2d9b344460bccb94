"""Long model names on narrow pages: where a name may wrap, and how labels too long for a chart are shortened
without losing the part that tells them apart (`Org/Model-7B-step-1200` vs `Org/Model-7B-step-2400`)."""

from __future__ import annotations

import os
import re

from markupsafe import Markup, escape

_AFTER = re.compile(r"(?<=[-_/.@:])")  # a name may wrap after its separators


def breakable(name: str) -> Markup:
    """`name` escaped, with a line-break opportunity (<wbr>) after each separator: a wrapped name breaks between its
    parts, never in the middle of one unless a part alone is wider than its box."""
    return Markup("<wbr>").join(escape(part) for part in _AFTER.split(str(name)))


def shorten(label: str, limit: int) -> str:
    """`label` whole if it fits `limit` characters, else its start and its end around an ellipsis (the end names the
    checkpoint, the step, the setting)."""
    label = str(label)
    if len(label) <= limit:
        return label
    tail = (limit - 1) // 2
    head = limit - 1 - tail
    return label[:head] + "…" + label[len(label) - tail:]


def short_labels(labels: list[str], limit: int) -> list[str]:
    """Each label whole if it fits `limit` characters; else first cut where it repeats the start the labels share
    (an ellipsis in its place), then around the middle (`shorten`): the part that tells runs apart stays."""
    shared = len(os.path.commonprefix(labels)) if len(labels) > 1 else 0
    out = []
    for label in map(str, labels):
        if len(label) <= limit:
            out.append(label)
            continue
        cut = min(shared, len(label) - (limit - 1))
        out.append(shorten(("…" if cut else "") + label[cut:], limit))
    return out
