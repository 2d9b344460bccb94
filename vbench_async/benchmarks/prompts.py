"""Prompt rendering from the jinja2 templates in `prompts/`: the text part of the user message.

The message itself (video, then the optional image, then this text) is built by the backends. Question and options
are inserted exactly as the record has them; the templates add only instructions. The hash of every template a
benchmark can use goes into the run's config hash, so editing a template never mixes with old results.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any, Iterable

import jinja2

from ..errors import SampleError, UserError
from ..samples import Sample

TEMPLATE_DIR = Path(__file__).resolve().parent / "prompts"
_INCLUDE_RE = re.compile(r"""\{%-?\s*(?:import|include|extends|from)\s+["']([^"']+)["']""")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,  # a misspelt variable is an error, not an empty string
        autoescape=False,  # prompts are plain text: "<" in a question must stay "<"
        keep_trailing_newline=False,
    )


@cache
def _template_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in TEMPLATE_DIR.glob("*.jinja") if not p.name.startswith("_")))


def template_names() -> list[str]:
    """Templates a card may name (files starting with "_" hold shared macros). Read once: rendering checks the name
    for every sample, and a directory listing per prompt cost a plan of 10,000 questions seconds."""
    return list(_template_names())


def check_template(name: str) -> None:
    if name not in _template_names():
        raise UserError(f"unknown prompt template {name!r}; available: {', '.join(template_names())}")


def letter_list(letters: list[str]) -> str:
    """"A", "A or B", "A, B, C, or D": the letter range as the Qwen / lmms-eval prompts spell it."""
    if len(letters) <= 1:
        return "".join(letters)
    if len(letters) == 2:
        return f"{letters[0]} or {letters[1]}"
    return ", ".join(letters[:-1]) + f", or {letters[-1]}"


def _canonical(task_type: str) -> str:
    from ..scoring import UnknownTaskType, canonical_task_type

    try:
        return canonical_task_type(task_type)
    except UnknownTaskType:
        return task_type


def render(template: str, sample: Sample, thinking: bool = False) -> str:
    """Render one sample with the named template. Raises SampleError for a sample the template cannot serve."""
    check_template(template)
    task_type = _canonical(sample.task_type)
    if template == "multiple_choice" and not sample.options:
        raise SampleError("record_invalid", f"{sample.key}: a multiple-choice question without options")
    letters = sample.option_letters
    context: dict[str, Any] = {
        "question": sample.question,
        "options": list(sample.options),
        "letters": letters,
        "letter_list": letter_list(letters),
        "has_image": bool(sample.images),
        "thinking": bool(thinking),
        "task": sample.task_type,
        "task_type": task_type,
        "fields": dict(sample.fields),
    }
    return environment().get_template(f"{template}.jinja").render(context)


def _with_includes(names: Iterable[str]) -> list[str]:
    """The named templates and every template they import, transitively, sorted."""
    todo, seen = [f"{n}.jinja" for n in names], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_INCLUDE_RE.findall((TEMPLATE_DIR / name).read_text(encoding="utf-8")))
    return sorted(seen)


def template_hash(routing: dict[str, str]) -> str:
    """A short hash of the routing (task type -> template) and the source of every template it reaches."""
    h = hashlib.sha256()
    for key in sorted(routing):
        h.update(f"route {key}={routing[key]}\n".encode())
    for name in _with_includes(set(routing.values())):
        h.update(f"file {name}\n".encode())
        h.update((TEMPLATE_DIR / name).read_bytes())
    return h.hexdigest()[:16]
