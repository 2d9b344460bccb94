"""One grading function per official protocol: (sample, output) -> Reading, as the benchmark's own code scores it.

lmms-eval protocols first cut reasoning blocks as lmms-eval's CLI does (`strip_reasoning_tags`); the others read
the raw output as their scripts do. Where the official code draws a random letter for an unreadable answer, the
draw is seeded by the sample's key and the reading says `guessed`.
"""

from __future__ import annotations

import re

from ...samples import Sample
from .. import answer_extraction as extract
from ..base import Reading
from ..grounding import parse_span
from ..task_types import canonical_task_type
from ..tasks import ground_truth, valid_letters
from . import answers, choice, qwen3vl
from .common import option_texts, raw_truth_text, seeded_guess, strip_reasoning_tags, truth_letter, truth_text


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


def videomme_qwen3vl(sample: Sample, output: str) -> Reading:
    """Video-MME as the Qwen3-VL repository's script reads it: `can_infer` on the text after the last `</think>`;
    where the rule reads nothing, the script's GPT judge decides (needs judge), never a silent 0."""
    text = qwen3vl.final_text(output)
    read = qwen3vl.can_infer(text, qwen3vl.option_choices(sample.options))
    if read is None:
        return Reading(None, text[:80] or None, needs_judge=True)
    return _letter_reading(read, truth_letter(sample))


def lmms_abcd(sample: Sample, output: str) -> Reading:
    """LVBench, MLVU: the shared extractor over A-D only (MLVU-test's E/F truths can never be credited)."""
    return _letter_reading(choice.lmms_mcq_extract(strip_reasoning_tags(output), "ABCD"), truth_letter(sample))


def mvbench(sample: Sample, output: str) -> Reading:
    """MVBench `mcq_acc`; an empty prediction (after the reasoning cut: a closed `<think>` alone is empty too) is
    left out of `mvbench_aggregate_results`' denominator."""
    text = strip_reasoning_tags(output)
    correct, read = choice.mvbench_correct(truth_letter(sample), text)
    return Reading(1.0 if correct else 0.0, read or None, dropped=text == "")


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
        if answers.mmvu_open_rule(text, raw_truth_text(sample)):  # lmms-eval reads doc["answer"] as it is
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
    if preds is None:  # "API Error": the official aggregation drops the item from its denominator
        return Reading(0.0, None, dropped=True)
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
    """OVO-Bench as the authors' `utils/OVOBenchScore.py` scores the saved response: the raw output, nothing cut
    (a named variant; the card follows lmms-eval, `ovobench_lmms`). Backward/real-time letters by substring; REC by
    concatenated digits; SSR/CRR by Y/N or the substring Yes/No."""
    return _ovobench_read(sample, output)


def ovobench_lmms(sample: Sample, output: str) -> Reading:
    """lmms-eval's port of the same rules, which first cuts closed reasoning blocks (its CLI's `--reasoning_tags`),
    the card's official reading: `<think>It could be B...</think><answer>D</answer>` reads D here (B by the
    authors' scorer), and `<think>maybe 5?</think>4` reads 4 (54 there)."""
    return _ovobench_read(sample, strip_reasoning_tags(output))


def _ovobench_read(sample: Sample, text: str) -> Reading:
    kind = canonical_task_type(sample.task_type)  # REC is counting, SSR/CRR are boolean
    if kind == "counting":
        count = ground_truth(sample, lambda t, w: extract.parse_number(t, w), "a count").value
        ok = answers.ovo_rec_correct(text, int(count))
        return Reading(1.0 if ok else 0.0, "".join(c for c in text if c.isdigit()) or None)
    if kind == "boolean":
        truth_yes = str(sample.fields.get("ovo_type")) == "1" if "ovo_type" in sample.fields else (
            ground_truth(sample, lambda t, w: extract.parse_yes_no(t, w), "yes or no") == "yes")
        return Reading(1.0 if answers.ovo_yes_no_correct(text, truth_yes) else 0.0, text[:40] or None)
    truth = truth_letter(sample)
    return Reading(1.0 if truth in text.strip() else 0.0, truth if truth in text else None)


# --------------------------------------------------------------------------------------------- TempCompass


_LABEL = re.compile(r"^\s*(Caption|Sentence|Option)\s+[A-Z]")


def _tempcompass_format(sample: Sample) -> tuple[str, str | None]:
    """(format, option label): the record's `format` field (the hub loader's folder name) when present, else
    inferred; the label ("Caption", "Sentence") from `option_label` or the option lines themselves."""
    label = sample.fields.get("option_label")
    if not label:
        m = next((m for o in sample.options for m in [_LABEL.match(o)] if m), None)
        label = m.group(1) if m else None
    fmt = str(sample.fields.get("format") or "")
    if not fmt:
        fmt = ("caption_matching" if label else "multi-choice") if sample.options else (
            "yes_no" if sample.task_type.lower() in ("boolean", "yes/no", "yes_no") else "captioning")
    return fmt, label


def tempcompass(sample: Sample, output: str) -> Reading:
    """TempCompass: hand-written rules per format; where they fail the official code asks ChatGPT (needs judge),
    and captioning is always judged. The official answer string is the truth's option line in the release's own
    layout ("A. slower", "Caption A: ...")."""
    text = strip_reasoning_tags(output)
    fmt, label = _tempcompass_format(sample)
    if fmt == "yes_no":
        truth = ground_truth(sample, lambda t, w: extract.parse_yes_no(t, w), "yes or no")
        rated = answers.tempcompass_yes_no(text, truth)
    elif fmt == "caption_matching" and sample.options:
        lines = [f"{label or 'Caption'} {letter}: {body}" for letter, body in option_texts(sample).items()]
        answer = lines[sample.option_letters.index(truth_letter(sample))]
        rated = answers.tempcompass_caption_matching(text, "\n".join([sample.question.split("\n")[0], *lines]), answer)
    elif sample.options:
        letter = truth_letter(sample)
        rated = answers.tempcompass_multi_choice(text, f"{letter}. {option_texts(sample)[letter]}")
    else:
        rated = None  # captioning: multiple choice answered from the caption by an LLM
    if rated is None:
        return Reading(None, text[:80] or None, needs_judge=True)
    return Reading(float(rated), text[:80] or None)


# ------------------------------------------------------------------------------------- other official code


def longvideoreason(sample: Sample, output: str) -> Reading:
    """NVlabs/Long-RL `eval/eval.py`: math-verify on the whole output against the truth, else the first
    single-line `<answer>...</answer>` (after an optional "Therefore the final answer is:") equals the truth."""
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
    frames either side has (0 without boxes). With the release's own fields (`meta`: split, width, height,
    time_token, boxes_by_frame) the output is read as LLaVA-ST reads it, special tokens only; without them (the
    unified file) the project's JSON reading in seconds stands in."""
    from ..grounding import llava_st_meta, stvg_item

    meta = llava_st_meta(sample)
    if meta is not None:
        item = answers.llava_st_item(output, **meta)
        return Reading(item["viou"], f"{item['n_pred_frames']} box frame(s)" if item["n_pred_frames"] else None)
    item = stvg_item(sample, output)
    return Reading(item["viou"], item.get("extracted"))


def livesports(sample: Sample, output: str) -> Reading:
    """showlab/livecc: the official predictor picks a letter by its logits; its scorer compares the response's first
    character with the answer letter, applied here to the generated text as it is (no reasoning-tag cut). An empty
    response makes the official scorer raise; here it scores 0."""
    read = output[0] if output else None
    return Reading(1.0 if read is not None and read == truth_letter(sample) else 0.0, read)


def videoreasonbench(sample: Sample, output: str) -> Reading:
    """llyx97/video_reason_bench: a response whose `extract_final_answer` is empty is wrong before any judge runs
    (no "Final Answer", case-sensitive; nothing after it; or none after Kimi's `◁/think▷` mark); the text after the
    first one goes to the LLM judge."""
    final = answers.vrb_final_answer(output)
    if final is None:
        return Reading(0.0, None)
    return Reading(None, final[:80], needs_judge=True)


def needs_judge(sample: Sample, output: str) -> Reading:
    """Benchmarks whose official score is an LLM judge's verdict (VCR-Bench, VideoReasonBench, Video-MMLU)."""
    return Reading(None, None, needs_judge=True)
