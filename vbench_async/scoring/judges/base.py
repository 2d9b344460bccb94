"""What every judge protocol shares: the item a judge sees, the prompts it asks, the outcome it ends with.

A protocol is pure: `start(item)` returns the first round of prompts (or an outcome straight away), and
`advance(item, asks, replies)` turns the judge's replies into the next round or the outcome. The judge pass
(`vbench_async/evaluation/judge_pass.py`) sends the prompts through any backend; tests feed hand-written replies.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...sample_result import Result
from ...samples import Sample
from ..base import Reading

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)

# Error kinds of an outcome without a score (stable labels, shown in summaries).
UNPARSABLE = "judge_unparsable"  # the judge gave no clear verdict
NEEDS_FIELDS = "judge_needs_release_fields"  # the protocol needs fields the record lacks (a unified file)


@dataclass(frozen=True)
class JudgeItem:
    """What a judge reads of one result line."""

    sample_id: str
    benchmark: str
    question: str
    reference: str  # the ground truth as a reader says it (inside <answer>...</answer> when tagged)
    output: str  # the model's whole output
    options: tuple[str, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)
    video: str | None = None
    task_type: str = "open-ended"
    answer: str = ""  # the raw ground truth ("<answer>B</answer>")
    official: Reading | None = None  # the official reading of the output

    @classmethod
    def from_result(cls, line: Result | Mapping[str, Any]) -> JudgeItem:
        r = Result.of(line)
        return cls(sample_id=r.sample_id, benchmark=r.benchmark, question=r.question,
                   reference=reference_text(r.answer), output=r.output or "", options=tuple(r.options),
                   fields=dict(r.fields), video=r.video, task_type=r.task_type or "open-ended", answer=r.answer,
                   official=r.reading("official"))

    def sample(self) -> Sample:
        return Sample(benchmark=self.benchmark, sample_id=self.sample_id, task_type=self.task_type,
                      question=self.question, answer=self.answer, options=self.options, video=self.video,
                      fields=self.fields)

    def question_with_options(self) -> str:
        return "\n".join([self.question.rstrip(), *self.options]) if self.options else self.question


@dataclass(frozen=True)
class Ask:
    """One prompt to the judge. `stage` names it in the verdict line; `system` (the official system prompt, if
    any) is sent ahead of the prompt in the one user message every backend renders."""

    stage: str
    prompt: str
    max_tokens: int = 32
    system: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)  # what earlier rounds read, for the next one

    def text(self) -> str:
        return f"{self.system.strip()}\n\n{self.prompt}" if self.system else self.prompt


@dataclass(frozen=True)
class Outcome:
    """The end of judging one item: a score in [0, 1] with its verdict, or an error (score None) that leaves the
    item waiting for a judge."""

    score: float | None
    verdict: str | None = None  # "correct" / "incorrect", or the protocol's own label
    error: dict[str, str] | None = None
    info: dict[str, Any] = field(default_factory=dict)  # what the protocol read on the way (JSON)

    @classmethod
    def of(cls, correct: bool, **info: Any) -> Outcome:
        return cls(1.0 if correct else 0.0, "correct" if correct else "incorrect", None, info)

    @classmethod
    def failed(cls, kind: str, message: str, **info: Any) -> Outcome:
        return cls(None, None, {"kind": kind, "message": message}, info)


class JudgeProtocol:
    """A benchmark's judging protocol. Subclasses set `name`, `source` and `templates` (every pinned prompt text,
    hashed into `prompt_hash`) and implement `start` and `advance`."""

    name = "generic"
    source = ""
    templates: Mapping[str, str] = {}

    @property
    def prompt_hash(self) -> str:
        blob = "\x00".join(f"{k}\x01{v}" for k, v in sorted(self.templates.items()))
        return hashlib.sha256(f"{self.name}\x02{blob}".encode()).hexdigest()[:16]

    def start(self, item: JudgeItem) -> list[Ask] | Outcome:
        raise NotImplementedError

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> list[Ask] | Outcome:
        raise NotImplementedError


def reference_text(answer: object) -> str:
    """The reference answer as a reader would say it: the inside of <answer>...</answer> when present."""
    text = str(answer or "")
    m = _ANSWER_TAG.search(text)
    return m.group(1).strip() if m else text.strip()


_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)


def without_think(text: str) -> str:
    """A judge's reply without its reasoning block (reasoning judges think before the verdict)."""
    return _THINK.sub(" ", text or "").strip()


def correct_incorrect(text: str) -> bool | None:
    """The official "Correct"/"Incorrect" reply (TempCompass's `llm_output_to_rating` order: a reply starting with
    one of the words, else the one word present). None when neither word is there."""
    text = without_think(text)
    if text.startswith("Correct"):
        return True
    if text.startswith("Incorrect"):
        return False
    if "Correct" in text and "Incorrect" not in text:
        return True
    if "Incorrect" in text:
        return False
    return None


def one_or_zero(text: str) -> bool | None:
    """A reply that is "1" or "0" (quotes, brackets and a trailing period allowed); None otherwise."""
    core = without_think(text).strip().strip("\"'`[]().").strip()
    return {"1": True, "0": False}.get(core)
