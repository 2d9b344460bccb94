"""Prompt rendering from the jinja2 templates in `prompts/`: the text part of the user message.

The message itself (video, then the optional image, then this text) is built by the backends. Question and options
are inserted exactly as the record has them; the templates add only instructions. The hash of every template a
benchmark can use goes into the run's config hash, so editing a template never mixes with old results.

Variants (`--prompt-variant`, `PromptSettings`): a card routes each task type to a template (`prompts/<name>.jinja`);
the variant picks the file that renders it:
    official     `prompts/official/<benchmark id>.jinja`, the benchmark's own prompt (as its authors' evaluation code,
                 or lmms-eval's task for it, words it) when one is published; otherwise the routed template, which
                 uses the Video-MME / Qwen wording. With `--thinking` the routed reasoning template always applies.
    predecessor  `prompts/predecessor/<name>.jinja`, EasyVideoR1's prompt per task type, for comparison.
    qwen3-vl, lmms-eval-qwen3-vl, vlmevalkit
                 `prompts/<variant>/<benchmark id>.jinja`, the prompt a model maker's own code sends for that benchmark
                 (the Qwen3-VL repository's scripts; lmms-eval's `--model qwen3_vl` kwargs; VLMEvalKit's dataset
                 classes as its Qwen3-VL model sends them); a benchmark without one gets `official`. The evaluation
                 recipes (`recipes.py`) name them.
The variant name and every file it can reach are part of the template hash.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Iterable

import jinja2

from ..errors import SampleError, UserError
from ..failure_kinds import FailureKind
from ..samples import Sample

TEMPLATE_DIR = Path(__file__).resolve().parent / "prompts"
PROMPT_VARIANTS = ("official", "predecessor", "qwen3-vl", "lmms-eval-qwen3-vl", "vlmevalkit")
DEFAULT_VARIANT = "official"
# Variants whose folder holds one file per benchmark, and the variant a benchmark without its file falls back to.
_PER_BENCHMARK: dict[str, str | None] = {"official": None, "qwen3-vl": "official", "lmms-eval-qwen3-vl": "official",
                                         "vlmevalkit": "official"}
_INCLUDE_RE = re.compile(r"""\{%-?\s*(?:import|include|extends|from)\s+["']([^"']+)["']""")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,  # a misspelt variable is an error, not an empty string
        autoescape=False,  # prompts are plain text: "<" in a question must stay "<"
        keep_trailing_newline=False,
    )


@dataclass(frozen=True)
class PromptSettings:
    """Which prompt each benchmark gets (the field's `help` is its command-line text, `cli/options.py`).
    `prompt_variant` None: the user chose none, so a --recipe's variant holds, else DEFAULT_VARIANT."""

    prompt_variant: str | None = field(default=None, metadata={
        "help": "official: each benchmark's own published prompt where one exists (else the Video-MME wording); "
                "predecessor: EasyVideoR1's prompts, for comparison; qwen3-vl, lmms-eval-qwen3-vl, vlmevalkit: the "
                "prompt the Qwen3-VL repository's scripts (Video-MME), lmms-eval's qwen3_vl model (Video-MME, "
                "Video-Holmes), or VLMEvalKit's Qwen3-VL config (Video-MME) send where it differs from official. "
                f"Recorded in the manifest and the config hash (default: {DEFAULT_VARIANT}, or the --recipe's "
                "variant when it names one)",
        "choices": PROMPT_VARIANTS})

    def __post_init__(self) -> None:
        if self.prompt_variant is not None:
            check_variant(self.prompt_variant)


def check_variant(variant: str) -> None:
    if variant not in PROMPT_VARIANTS:
        raise UserError(f"unknown prompt variant {variant!r}; choose from {', '.join(PROMPT_VARIANTS)}")


@cache
def _variant_files() -> frozenset[str]:
    """Template names inside the variant folders ("official/mvbench", "predecessor/multiple_choice")."""
    return frozenset(f"{v}/{p.stem}" for v in PROMPT_VARIANTS for p in (TEMPLATE_DIR / v).glob("*.jinja"))


def resolve(template: str, benchmark: str, variant: str = DEFAULT_VARIANT, thinking: bool = False) -> str:
    """The template file that renders the card's routed `template` for `benchmark` (a card id; a preset's
    "<id>@<preset>" uses its card's) under `variant`."""
    check_variant(variant)
    if variant in _PER_BENCHMARK:  # a preset with its own file (mlvu@dev: official/mlvu_dev), else the card's
        names = (f"{variant}/{benchmark.replace('@', '_')}", f"{variant}/{benchmark.partition('@')[0]}")
        name = next((n for n in names if n in _variant_files()), None)
        fallback = _PER_BENCHMARK[variant]
        if name is None and fallback is not None:
            return resolve(template, benchmark, fallback, thinking)
        return name if not thinking and name is not None else template
    name = f"{variant}/{template}"
    return name if name in _variant_files() else template


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


def render(template: str, sample: Sample, thinking: bool = False,
           loaded: dict[str, Prepared] | None = None) -> str:
    """Render one sample with the named template (a card's template name, or a variant's file as `resolve` names
    it). Raises SampleError for a sample the template cannot serve. `loaded`: templates already looked up and
    prepared by this caller (a plan renders 100,000 prompts; looking a template up again checks its file each
    time)."""
    prepared = loaded.get(template) if loaded is not None else None
    if prepared is None:
        if template not in _variant_files():
            check_template(template)
        compiled = environment().get_template(f"{template}.jinja")
        prepared = Prepared.of(compiled) if loaded is not None else Prepared(compiled)
        if loaded is not None:
            loaded[template] = prepared
    from ..scoring.task_types import canonical_or_given

    task_type = canonical_or_given(sample.task_type)
    if not sample.options and (template.rpartition("/")[2] == "multiple_choice"
                               or (template.startswith("official/") and task_type == "multiple choice")):
        raise SampleError(FailureKind.RECORD_INVALID, f"{sample.key}: a multiple-choice question without options")
    reads = prepared.reads
    context: dict[str, Any] = {
        "question": sample.question,
        "options": list(sample.options),
        "has_image": bool(sample.images),
        "thinking": bool(thinking),
        "task": sample.task_type,
        "task_type": task_type,
    }
    # The costlier values only for a template that reads them (the rendered text is the same: it reads no other).
    if reads is None or "option_texts" in reads:
        context["option_texts"] = [_OPTION_PREFIX.sub("", o, count=1) for o in sample.options]
    if reads is None or "letters" in reads or "letter_list" in reads:
        letters = sample.option_letters
        context["letters"] = letters
        context["letter_list"] = letter_list(letters)
    if reads is None or "fields" in reads:
        context["fields"] = dict(sample.fields)
    return prepared.render(context)


@dataclass(frozen=True)
class Prepared:
    """A template, and what rendering it many times needs once: the context variables it reads (None: any, for a
    template that includes or extends another, or imports one with its context) and its globals as one dict."""

    template: jinja2.Template
    reads: frozenset[str] | None = None
    globals: dict[str, Any] | None = None

    @classmethod
    def of(cls, template: jinja2.Template) -> Prepared:
        from jinja2 import meta, nodes

        assert template.filename is not None  # loaded from TEMPLATE_DIR
        tree = template.environment.parse(Path(template.filename).read_text(encoding="utf-8"))
        shares = any(True for _ in tree.find_all((nodes.Include, nodes.Extends)))
        shares = shares or any(getattr(n, "with_context", False)
                               for n in tree.find_all((nodes.Import, nodes.FromImport)))
        reads = None if shares else frozenset(meta.find_undeclared_variables(tree))
        return cls(template, reads, dict(template.globals))

    def render(self, context: dict[str, Any]) -> str:
        """`Template.render(context)`. With the globals merged once: jinja merges its chain of globals (the
        template's and the environment's) into a new dict and set on every render, a third of a short prompt's
        rendering time."""
        t = self.template
        if self.globals is None:
            return t.render(context)
        from jinja2.runtime import new_context

        ctx = new_context(t.environment, t.name, t.blocks, context, False, self.globals, None)
        try:
            return t.environment.concat(t.root_render_func(ctx))
        except Exception:  # as Template.render does: the template's own traceback
            t.environment.handle_exception()
            raise  # handle_exception always raises


# "A. text", "A: text", "(A) text": the letter prefix of an option line (templates that letter options their own way)
_OPTION_PREFIX = re.compile(r"^\s*\(?[A-Z]\s*[.:)]\s*")


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


def variant_templates(routing: dict[str, str], benchmark: str, variant: str = DEFAULT_VARIANT) -> list[str]:
    """Every template file a benchmark's routing reaches under `variant` (with and without thinking)."""
    return sorted({resolve(t, benchmark, variant, thinking) for t in routing.values() for thinking in (False, True)})


def template_hash(routing: dict[str, str], benchmark: str = "", variant: str = DEFAULT_VARIANT) -> str:
    """A short hash of the variant, the routing (task type -> template) and the source of every template it
    reaches."""
    h = hashlib.sha256()
    h.update(f"variant {variant}\n".encode())
    for key in sorted(routing):
        h.update(f"route {key}={routing[key]}\n".encode())
    for name in _with_includes(variant_templates(routing, benchmark, variant)):
        h.update(f"file {name}\n".encode())
        h.update((TEMPLATE_DIR / name).read_bytes())
    return h.hexdigest()[:16]
