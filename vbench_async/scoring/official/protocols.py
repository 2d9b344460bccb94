"""One grading function per official protocol: (sample, output) -> Reading, as the benchmark's own code scores it.

lmms-eval protocols first cut reasoning blocks as lmms-eval's CLI does (`strip_reasoning_tags`); the others read
the raw output as their scripts do. Where the official code draws a random letter for an unreadable answer, the
draw is seeded by the sample's key and the reading says `guessed`.
"""

from __future__ import annotations

from ...samples import Sample
from .. import extract
from ..base import Reading
from ..grounding import parse_span
from ..tasks import ground_truth, valid_letters
from . import answers, choice
from .common import option_texts, seeded_guess, strip_reasoning_tags, truth_letter, truth_text


def _letter_reading(read: str | None, truth: str, guessed: bool = False, *, fold_case: bool = False) -> Reading:
    hit = bool(read) and (read.lower() == truth.lower() if fold_case else read == truth)
    return Reading(1.0 if hit else 0.0, read or None, guessed)


def _or_guess(sample: Sample, read: str | None, choices) -> tuple[str, bool]:
    return (read, False) if read else (seeded_guess(sample, choices), True)


# ------------------------------------------------------------------------------------------ letter benchmarks


def videomme(sample: Sample, output: str) -> Reading:
    """Video-MME: the shared extractor over A-D; the truth compared case-insensitively."""
    return _letter_reading(choice.lmms_mcq_extract(strip_reasoning_tags(output), "ABCD"), truth_letter(sample),
                           fold_case=True)


def lmms_abcd(sample: Sample, output: str) -> Reading:
    """LVBench, MLVU: the shared extractor over A-D only (MLVU-test's E/F truths can never be credited)."""
    return _letter_reading(choice.lmms_mcq_extract(strip_reasoning_tags(output), "ABCD"), truth_letter(sample))


def mvbench(sample: Sample, output: str) -> Reading:
    correct, read = choice.mvbench_correct(truth_letter(sample), strip_reasoning_tags(output))
    return Reading(1.0 if correct else 0.0, read or None)


def longvideobench(sample: Sample, output: str) -> Reading:
    """The first capital A-E after the answer prefixes; a guess among the item's choices when there is none."""
    read, guessed = _or_guess(sample, choice.lvb_multi_choice(strip_reasoning_tags(output)), valid_letters(sample))
    return _letter_reading(read, truth_letter(sample), guessed)


def holmes(sample: Sample, output: str) -> Reading:
    texts = option_texts(sample)
    letters = sorted(texts) or valid_letters(sample)
    read = choice.mmmu_multi_choice(strip_reasoning_tags(output), letters, texts)
    read, guessed = _or_guess(sample, read, letters)
    return Reading(1.0 if read.upper() == truth_letter(sample).upper() else 0.0, read, guessed)


def minerva(sample: Sample, output: str) -> Reading:
    read, guessed = _or_guess(sample, choice.minerva_letter(strip_reasoning_tags(output)), "ABCDE")
    return _letter_reading(read, truth_letter(sample), guessed)


def motionbench(sample: Sample, output: str) -> Reading:
    return _letter_reading(choice.motionbench_letter(strip_reasoning_tags(output)), truth_letter(sample))


def videomathqa(sample: Sample, output: str) -> Reading:
    return _letter_reading(choice.videomathqa_letter(strip_reasoning_tags(output)), truth_letter(sample))


def mmvu(sample: Sample, output: str) -> Reading:
    """MMVU: rules for multiple choice; open-ended items pass by rule or go to the LLM judge."""
    text = strip_reasoning_tags(output)
    if not sample.options:
        if answers.mmvu_open_rule(text, truth_text(sample)):
            return Reading(1.0, text[:100] or None)
        return Reading(None, text[:100] or None, needs_judge=True)
    ok = choice.mmvu_choice_correct(text, truth_letter(sample), option_texts(sample))
    return Reading(1.0 if ok else 0.0, choice.mmvu_choice_read(text))


def videommmu(sample: Sample, output: str) -> Reading:
    """Video-MMMU: the shared extractor over the item's letters; open answers by MMMU's key-sentence parser with
    numbers rounded to 2 decimals."""
    text = strip_reasoning_tags(output)
    if sample.options:
        read = choice.lmms_mcq_extract(text, valid_letters(sample)) or "No Answer Found."
        return Reading(1.0 if read == truth_letter(sample) else 0.0, read)
    preds = answers.mmmu_open_response(text)
    if preds is None:  # "API Error": the official aggregation drops the item; here it scores 0
        return Reading(0.0, None)
    ok = answers.mmmu_eval_open(truth_text(sample), preds)
    return Reading(1.0 if ok else 0.0, ", ".join(sorted(map(str, preds)))[:200])


_VSI_MC = ("object_rel_direction", "object_rel_distance", "route_planning", "obj_appearance_order")


def vsibench(sample: Sample, output: str) -> Reading:
    """VSI-Bench: multiple choice is the first token (dots stripped) against the truth letter, case-insensitively;
    numeric answers are the first number (digits or words) scored by MRA."""
    from ..metrics import mean_relative_accuracy

    text = strip_reasoning_tags(output)
    kind = str(sample.fields.get("original_question_type") or "")
    if sample.options or kind.startswith(_VSI_MC):
        read = answers.vsi_fuzzy_letter(text)
        return Reading(1.0 if read.lower() == truth_letter(sample).lower() else 0.0, read or None)
    pred = answers.vsi_extract_number(text)
    truth = ground_truth(sample, lambda t, w: extract.parse_number(t, w), "a number").value
    if pred is None:
        return Reading(0.0, None)
    return Reading(mean_relative_accuracy(pred, truth), f"{pred:g}")


def charades_sta(sample: Sample, output: str) -> Reading:
    spans = answers.charades_extract_time(strip_reasoning_tags(output))
    truth = ground_truth(sample, parse_span, "a time span")
    if len(spans) != 1:
        return Reading(0.0, None)
    return Reading(answers.charades_iou(truth, spans[0]), f"[{spans[0][0]:g}, {spans[0][1]:g}]")


# ----------------------------------------------------------------------------------------------- OVO-Bench


def ovobench(sample: Sample, output: str) -> Reading:
    """OVO-Bench: backward/real-time letters by substring; REC by concatenated digits; SSR/CRR by Y/N or the
    substring Yes/No. lmms-eval strips backward/real-time responses only (after its CLI cut reasoning tags)."""
    text = strip_reasoning_tags(output)
    task = str(sample.fields.get("ovo_task") or sample.task_type).upper()
    if task == "REC":
        count = ground_truth(sample, lambda t, w: extract.parse_number(t, w), "a count").value
        ok = answers.ovo_rec_correct(text, int(count))
        return Reading(1.0 if ok else 0.0, "".join(c for c in text if c.isdigit()) or None)
    if task in ("SSR", "CRR"):
        truth_yes = str(sample.fields.get("ovo_type")) == "1" if "ovo_type" in sample.fields else (
            ground_truth(sample, lambda t, w: extract.parse_yes_no(t, w), "yes or no") == "yes")
        return Reading(1.0 if answers.ovo_yes_no_correct(text, truth_yes) else 0.0, text[:40] or None)
    truth = truth_letter(sample)
    return Reading(1.0 if truth in text.strip() else 0.0, truth if truth in text else None)


# --------------------------------------------------------------------------------------------- TempCompass


def tempcompass(sample: Sample, output: str) -> Reading:
    """TempCompass: hand-written rules per format; where they fail the official code asks ChatGPT (needs judge).
    The official answer string is the truth's option line ("A. slower", "Caption A: ...")."""
    text = strip_reasoning_tags(output)
    if not sample.options:
        if sample.task_type.lower() in ("boolean", "yes/no", "yes_no"):
            truth = ground_truth(sample, lambda t, w: extract.parse_yes_no(t, w), "yes or no")
            rated = answers.tempcompass_yes_no(text, truth)
        else:
            rated = None  # captioning: multiple choice answered from the caption by an LLM
    else:
        letter = truth_letter(sample)
        answer = sample.options[sample.option_letters.index(letter)]
        if any(o.lstrip().startswith(("Caption", "Sentence", "Option")) for o in sample.options):
            question = "\n".join([sample.question.split("\n")[0], *sample.options])
            rated = answers.tempcompass_caption_matching(text, question, answer)
        else:
            rated = answers.tempcompass_multi_choice(text, answer)
    if rated is None:
        return Reading(None, text[:80] or None, needs_judge=True)
    return Reading(float(rated), text[:80] or None)


# ------------------------------------------------------------------------------------- other official code


def longvideoreason(sample: Sample, output: str) -> Reading:
    """NVlabs/Long-RL `eval/eval.py`: math-verify on the whole output against the truth, else the first
    single-line `<answer>...</answer>` (after an optional "Therefore the final answer is:") equals the truth."""
    import re

    from ..math_task import raw_verify

    if raw_verify(output, sample.answer):
        return Reading(1.0, None)
    gm = re.search(r"<answer>(.*?)</answer>", sample.answer)
    truth = gm.group(1).strip() if gm else sample.answer.strip()
    if "Therefore the final answer is:" in output:
        m = re.search(r"<answer>Therefore the final answer is: (.*?)</answer>", output)
    else:
        m = re.search(r"<answer>(.*?)</answer>", output)
    read = m.group(1).strip() if m else output.strip()
    return Reading(1.0 if read == truth else 0.0, read[:80] or None)


def stvg(sample: Sample, output: str) -> Reading:
    """ST-Align `eval_stvg`, per item: vIoU = the box IoUs summed over the frames both sides have, divided by the
    frames either side has (0 without boxes); the item's tIoU is in the aggregate. The output is read with the
    project's JSON parser and boxes are compared in the frame the model saw (see grounding.py)."""
    from ..grounding import stvg_item

    item = stvg_item(sample, output)
    return Reading(item["viou"], item.get("extracted"))


def needs_judge(sample: Sample, output: str) -> Reading:
    """Benchmarks whose official score is an LLM judge's verdict (VCR-Bench, VideoReasonBench, Video-MMLU)."""
    return Reading(None, None, needs_judge=True)
