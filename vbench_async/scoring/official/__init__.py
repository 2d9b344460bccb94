"""Official protocols: each benchmark's own answer parser and rules, for the `official` half of every Score.

A benchmark card names its protocol (`official.protocol`); `score(sample, output, protocol=...)` fills
`Score.official` with `PROTOCOLS[name].grade(sample, output)`. `none` means no official per-sample code exists: the
official reading is then empty (value None) and the card says why; the headline falls back to the robust score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...samples import Sample
from ..base import Reading
from . import protocols as p

LMMS = "EvolvingLMMs-Lab/lmms-eval 0.7.3"


@dataclass(frozen=True)
class Protocol:
    name: str
    source: str  # repository and file of the official scoring code
    grade: Callable[[Sample, str], Reading] | None  # None: no official per-sample code ("none")
    numeric_decimals: int | None = None  # the robust grader compares numbers rounded to this many decimals


_TABLE = (
    Protocol("videomme", f"{LMMS} lmms_eval/tasks/videomme/utils.py (videomme_process_results)", p.videomme),
    Protocol("videomme_qwen3vl", "QwenLM/Qwen3-VL@96588727 evaluation/VideoMME (the text after the last </think>, "
             "eval_utils.py can_infer, then the GPT judge)", p.videomme_qwen3vl),
    Protocol("lvbench", f"{LMMS} lmms_eval/tasks/lvbench/utils.py (lvbench_process_results)", p.lmms_abcd),
    Protocol("mlvu", f"{LMMS} lmms_eval/tasks/mlvu/utils.py (mlvu_process_results)", p.lmms_abcd),
    Protocol("mvbench", f"{LMMS} lmms_eval/tasks/mvbench/utils.py (mcq_acc)", p.mvbench),
    Protocol("longvideobench", f"{LMMS} lmms_eval/tasks/longvideobench/utils.py (parse_multi_choice_response)",
             p.longvideobench),
    Protocol("holmes", f"{LMMS} lmms_eval/tasks/video_holmes/utils.py (parse_multi_choice_response)", p.holmes),
    Protocol("minerva", f"{LMMS} lmms_eval/tasks/minerva/utils.py (minerva_process_results)", p.minerva),
    Protocol("motionbench", f"{LMMS} lmms_eval/tasks/motionbench/utils.py (_extract_choice_letter)", p.motionbench),
    Protocol("videomathqa", f"{LMMS} lmms_eval/tasks/videomathqa/utils.py (extract_characters_regex)",
             p.videomathqa),
    Protocol("mmvu", f"{LMMS} lmms_eval/tasks/mmvu/utils.py (evaluate_with_rule_based, then the LLM judge)",
             p.mmvu),
    Protocol("vsibench", f"{LMMS} lmms_eval/tasks/vsibench/utils.py (vsibench_process_results)", p.vsibench),
    Protocol("charades_sta", f"{LMMS} lmms_eval/tasks/charades_sta/utils.py (extract_time, iou)", p.charades_sta),
    Protocol("videommmu", f"{LMMS} lmms_eval/tasks/videommmu/utils.py (parse_open_response, eval_open)",
             p.videommmu, numeric_decimals=2),
    Protocol("ovobench", "JoeLeelyf/OVO-Bench utils/OVOBenchScore.py (the raw response)", p.ovobench),
    Protocol("ovobench_lmms", f"{LMMS} lmms_eval/tasks/ovobench/score_utils/score.py (after the <think> cut)",
             p.ovobench_lmms),
    Protocol("tempcompass", f"{LMMS} lmms_eval/tasks/tempcompass/utils.py (rules, then the ChatGPT judge)",
             p.tempcompass),
    Protocol("longvideoreason", "NVlabs/Long-RL eval/eval.py (accuracy_reward)", p.longvideoreason),
    Protocol("stvg", "appletea233/LLaVA-ST inference/src/metrics.py (eval_stvg)", p.stvg),
    Protocol("livesports", "showlab/livecc evaluation/livesports3kqa (response[0] against the answer letter)",
             p.livesports),
    Protocol("videoreasonbench", "llyx97/video_reason_bench (the 'Final Answer' rule, then the LLM judge)",
             p.videoreasonbench),
    Protocol("judge", "the benchmark's LLM-judge protocol (see the card)", p.needs_judge),
    Protocol("none", "no official per-sample scoring code", None),
)
PROTOCOLS: dict[str, Protocol] = {pr.name: pr for pr in _TABLE}


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown official protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


__all__ = ["PROTOCOLS", "Protocol", "get_protocol"]
