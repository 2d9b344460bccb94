"""Judging protocols: how each judged benchmark's own code has an LLM score an output, as pure prompt-and-parse
steps (the judge pass in `vbench_async/judge.py` sends them through a backend).

    JUDGES[benchmark id]     the benchmark's protocol (VideoReasonBench, VCR-Bench, Video-MMLU, MMVU, TempCompass)
    judge_for(result)        the protocol for one result line (the project's generic prompt for other benchmarks)
    needs_judge(result)      the line waits for a judge: its free text has no careful reading, or its official
                             reading hands it to the judge
    PROMPT_HASH              one hash over every protocol's pinned prompts (part of a judge's identity)
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from .base import NEEDS_FIELDS, UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, reference_text
from .generic import GenericJudge, judge_prompt, parse_verdict
from .mmvu import MMVUJudge
from .tempcompass import TempCompassJudge
from .vcrbench import VCRBenchJudge
from .videommlu import VideoMMLUJudge
from .videoreasonbench import VideoReasonBenchJudge

GENERIC = GenericJudge()
JUDGES: dict[str, JudgeProtocol] = {
    "videoreasonbench": VideoReasonBenchJudge(), "vcrbench": VCRBenchJudge(), "videommlu": VideoMMLUJudge(),
    "mmvu": MMVUJudge(), "tempcompass": TempCompassJudge()}
PROMPT_HASH = hashlib.sha256("".join(j.prompt_hash for j in (GENERIC, *JUDGES.values())).encode()).hexdigest()[:16]


def judge_for(result: Mapping[str, Any]) -> JudgeProtocol:
    return JUDGES.get(str(result.get("benchmark") or ""), GENERIC)


def _official_needs_judge(result: Mapping[str, Any]) -> bool:
    official = result.get("official")
    return isinstance(official, Mapping) and bool(official.get("needs_judge"))


def needs_judge(result: Mapping[str, Any]) -> bool:
    """Whether a result line waits for a judge (before any verdict is applied)."""
    if result.get("error"):
        return False
    waits = bool((result.get("details") or {}).get("needs_judge"))
    if "seen_as" in result:  # a line seen through one reading (results.summaries.reading_line): that reading's wait
        return waits
    return waits or _official_needs_judge(result)


def awaits_judge(result: Mapping[str, Any]) -> bool:
    """Whether a result line, as aggregated, still has no verdict although it needs one."""
    return needs_judge(result) and not (result.get("details") or {}).get("judge")


__all__ = ["GENERIC", "JUDGES", "NEEDS_FIELDS", "PROMPT_HASH", "UNPARSABLE", "Ask", "JudgeItem", "JudgeProtocol",
           "Outcome", "awaits_judge", "judge_for", "judge_prompt", "needs_judge", "parse_verdict", "reference_text"]
