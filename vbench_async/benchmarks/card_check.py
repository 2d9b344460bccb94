"""What a card must satisfy beyond its syntax, checked when an included card loads (the built-in cards are held to
the same function by the tests): every task type is known to the scorers and has a prompt template, the named
templates, quirks, hooks and aggregation exist, and the frame settings make a valid frame spec."""

from __future__ import annotations

from ..errors import SampleError, UserError
from .cards import Card, preset_frames


def check_card(card: Card) -> None:
    """Raise UserError naming the card's file for the first inconsistency."""
    from ..frames.spec import FrameSpec
    from ..scoring import UnknownTaskType, canonical_task_type
    from .aggregate import KINDS
    from .prompts import template_names
    from .quirks import HUB_HOOKS, SAMPLE_HOOKS

    where = str(card.file or card.id)
    templates = set(template_names())
    for name in card.prompt.values():
        if name not in templates:
            raise UserError(f"{where}: unknown prompt template {name!r}; available: {', '.join(sorted(templates))}")
    for task_type in card.task_types:
        try:
            canonical = canonical_task_type(task_type)
        except UnknownTaskType as exc:
            raise UserError(f"{where}: task type {task_type!r} is unknown to the scorers ({exc})") from None
        try:
            card.template_for(task_type, canonical)
        except SampleError as exc:
            raise UserError(f"{where}: {exc}") from None
    unknown = [q for q in card.quirks if q not in SAMPLE_HOOKS]
    if unknown:
        raise UserError(f"{where}: unknown quirk(s) {', '.join(unknown)}; known: {', '.join(sorted(SAMPLE_HOOKS))}")
    hub = card.sources.hub
    if hub is not None and hub.hook is not None and hub.hook not in HUB_HOOKS:
        raise UserError(f"{where}: unknown hub hook {hub.hook!r}; known: {', '.join(sorted(HUB_HOOKS))}")
    if card.aggregation.kind not in KINDS:
        raise UserError(f"{where}: unknown aggregation kind {card.aggregation.kind!r}; known: {', '.join(KINDS)}")
    needs = {"macro": "field", "hierarchical": "levels"}.get(card.aggregation.kind)
    if needs and getattr(card.aggregation, needs) is None:
        raise UserError(f"{where}: aggregation kind {card.aggregation.kind} needs aggregation.{needs}")
    for preset, settings in {None: {}, **card.presets}.items():
        label = f" preset {preset}" if preset else ""
        frames = preset_frames(settings, f"{where}:{label}").over(card.frames).to_dict()
        try:
            FrameSpec(family="qwen2.5-vl", **frames)
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where}:{label} invalid frame settings {frames}: {exc}") from None
