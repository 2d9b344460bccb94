"""Judging protocols: how each judged benchmark's own code has an LLM score an output, as pure prompt-and-parse
steps (the judge pass in `vbench_async/evaluation/judge_pass.py` sends them through a backend).

    JUDGES[benchmark id]     the benchmark's protocol (VideoReasonBench, VCR-Bench, Video-MMLU, MMVU, TempCompass)
    judge_for(result)        the protocol for one result line (the project's generic prompt for other benchmarks)
    PROMPT_HASH              one hash over every protocol's pinned prompts (part of a judge's identity)
"""

from __future__ import annotations

import hashlib

from ...sample_result import Result
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


def judge_for(result: Result) -> JudgeProtocol:
    return JUDGES.get(result.benchmark, GENERIC)


__all__ = ["GENERIC", "JUDGES", "NEEDS_FIELDS", "PROMPT_HASH", "UNPARSABLE", "Ask", "JudgeItem", "JudgeProtocol",
           "Outcome", "judge_for", "judge_prompt", "parse_verdict", "reference_text"]
