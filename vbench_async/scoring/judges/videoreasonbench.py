"""VideoReasonBench (llyx97/video_reason_bench `eval_api.py` and `utils/eval_utils.py`): the text after the first
"Final Answer" goes to the judge with the question and the ground truth, and the judge says "Correct" or
"Incorrect". Items without a fixed answer (dim `prediction_operation`, the release's `answer` is null) go to the
state simulator instead: the judge lists the operations the response names, and they are played on the release's
recorded state (`vrb_states`).

The prompt texts are the protocol itself and are copied from `utils/eval_utils.py` (`get_judge_prompt`,
`extract_move_*`, `extract_file_cmd`). Differences, each documented in docs/scoring.md:
- the official code counts any reply but exactly "Correct" as wrong; here a reply that is neither word is a judge
  failure (the item keeps waiting), and "Correct." or "**Correct**" count as the word;
- the official code `eval`s the judge's list of operations; here it is read with `ast.literal_eval` (model output is
  never executed), and a reply that is no list scores 0, as the official code scores it;
- an operation naming a pile, cup or directory the item lacks scores 0 (the official code raises).
"""

from __future__ import annotations

import ast
import re
from typing import Any, Sequence

from ..official.answers import vrb_final_answer
from .base import NEEDS_FIELDS, UNPARSABLE, Ask, JudgeItem, JudgeProtocol, Outcome, correct_incorrect
from .vrb_states import DEMOS, NEEDED, PLAYERS, TargetUnreadable

SOURCE = "llyx97/video_reason_bench utils/eval_utils.py (get_judge_prompt, extract_move_*, eval_op_*)"

JUDGE = """You will be given a question, a model response and a ground-truth answer. Your task is to determine \
whether the model response is correct based on the ground-truth answer. The model response should contain all \
information in the ground-truth answer.

Question: {question}

Model Response: {response}

Ground-Truth Answer: {ground_truth}

Directly output "Correct" or "Incorrect":
"""

EXTRACT_MOVES = """You will be given a model-generated response describing a sequence of movements. Your task is to \
extract the movements in the order they appear and return them as a list (e.g., ['left', 'up', 'down', 'right']).

Model Response: {response}

Extracted Movements:
"""

EXTRACT_CUP = """You will be given a model-generated response describing a sequence of cup swaps. Each swap is \
represented as a pair of coordinates—for example, (a1, b2)—indicating the two positions being swapped. 

Your task:
Extract all coordinate pairs from the response in the exact order they appear, and return them as a list of tuples.

Format your answer like this:
[('a1', 'b2'), ('c1', 'b1'), ('a3', 'b2')]

Model Response:
{response}

Extracted Swaps:
"""

EXTRACT_FILE = """You will be given a model-generated response regarding a file operation command in Linux system.

Your task:
Identify and extract only the actual command from the model response, removing any irrelevant or descriptive text.

Model Response:
{response}

Extracted Command:
"""

EXTRACT_CARD = """You will be given a model-generated response describing a sequence of operations performed to \
cards. Each operation either adds or removes a card from pile0 or pile1.

Your task:
- Extract all valid operations and return them as a list of strings.

- Each operation must involve either adding or removing a card to or from pile0 or pile1.

- If no valid operations are found, return an empty list ([]).

Format your answer like this:
['add 6 of Hearts to pile0', 'remove King of Clubs from pile0']

Model Response:
{response}

Extracted Operations:
"""

EXTRACT_CHIP = """You will be given a model-generated response describing a sequence of operations involving chips \
and cups. Each operation either adds or removes a chip from cup0 or cup1.

Your task:
- Extract all valid operations and return them as a list of strings.

- Each operation must involve either adding or removing a chip to or from cup0 or cup1.

- If no valid operations are found, return an empty list ([]).


Format your answer like this:
['add 20 to cup0', 'remove 50 cup0']

Model Response:
{response}

Extracted Operations:
"""

EXTRACTORS = {"hrd": EXTRACT_MOVES, "grid": EXTRACT_MOVES, "cup": EXTRACT_CUP, "file_sys": EXTRACT_FILE,
              "card": EXTRACT_CARD, "chip": EXTRACT_CHIP}
OPERATION_DIM = "prediction_operation"
final_answer = vrb_final_answer  # the official `extract_final_answer`; the rule part lives with the protocols


def demo_of(item: JudgeItem) -> str | None:
    """The puzzle family (card, chip, cup, file_sys, grid, hrd), from the record or the video's folder."""
    demo = item.fields.get("demo")
    if demo in DEMOS:
        return str(demo)
    parts = re.split(r"[\\/]", str(item.video or ""))
    return next((p for p in parts if p in DEMOS), None)


def judge_prompt(question: str, response: str, ground_truth: str) -> str:
    return JUDGE.format(question=question, response=response, ground_truth=ground_truth)


def parse_judge(reply: str) -> bool | None:
    """Exactly "Correct" or "Incorrect" as the official code compares; tolerated: surrounding spaces, markup and a
    final period, or a reply that starts with one of the words. None otherwise (a judge failure)."""
    core = reply.strip().strip("*`\"'").rstrip(".").strip()
    if core in ("Correct", "Incorrect"):
        return core == "Correct"
    return correct_incorrect(reply)


def parse_operations(demo: str, reply: str) -> list[Any] | None:
    """The judge's list of operations as the official code reads it for `demo`; None when it is no list."""
    if demo == "file_sys":
        return reply.strip("`").replace("bash\n", "").split(" & ")
    try:
        ops = ast.literal_eval(reply.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return list(ops) if isinstance(ops, (list, tuple)) else None


class VideoReasonBenchJudge(JudgeProtocol):
    name = "videoreasonbench"
    source = SOURCE
    templates = {"judge": JUDGE, **{f"extract_{d}": t for d, t in EXTRACTORS.items()}}

    def is_operation_item(self, item: JudgeItem) -> bool | None:
        """True for the simulator's items, False for fixed answers, None when the record cannot tell (the unified
        file writes the release's null answer as "None", and four fixed answers are the word "None" too)."""
        dim = item.fields.get("dim")
        if dim:
            return dim == OPERATION_DIM
        return None if item.reference.strip() == "None" else False

    def start(self, item: JudgeItem) -> list[Ask] | Outcome:
        response = final_answer(item.output)
        if response is None:
            return Outcome.of(False, rule="no 'Final Answer' in the response")
        operation = self.is_operation_item(item)
        if operation is None:
            return Outcome.failed(NEEDS_FIELDS, "the answer 'None' may mark a state-simulator item; telling them "
                                  "apart and simulating needs the release's dim and states (use the hub source)")
        if not operation:
            return [Ask("judge", judge_prompt(item.question, response, item.reference), max_tokens=16)]
        demo = demo_of(item)
        missing = [k for k in NEEDED.get(demo or "", ("states",)) if item.fields.get(k) in (None, "")]
        if demo is None or missing:
            needed = ", ".join(missing) or "puzzle"
            return Outcome.failed(NEEDS_FIELDS, f"the state simulator needs the release's {needed}"
                                  " field(s) (use the hub source)")
        return [Ask(f"extract_{demo}", EXTRACTORS[demo].format(response=response), max_tokens=512)]

    def advance(self, item: JudgeItem, asks: Sequence[Ask], replies: Sequence[str]) -> Outcome:
        reply = replies[0]
        if asks[0].stage == "judge":
            verdict = parse_judge(reply)
            if verdict is None:
                return Outcome.failed(UNPARSABLE, 'no "Correct"/"Incorrect" verdict', reply=reply[:200])
            return Outcome.of(verdict)
        demo = asks[0].stage.removeprefix("extract_")
        ops = parse_operations(demo, reply)
        if not ops or (demo == "file_sys" and ops == [""]):
            return Outcome.of(False, operations=None, rule="the judge listed no operations")
        try:
            reached = PLAYERS[demo](ops, item.question, item.fields)
        except (TargetUnreadable, KeyError, IndexError, TypeError, ValueError) as exc:  # the record's fields
            return Outcome.failed("judge_record_invalid", f"{type(exc).__name__}: {exc}"[:200])
        return Outcome.of(reached, operations=[str(o) for o in ops][:64], rule="state simulator")
