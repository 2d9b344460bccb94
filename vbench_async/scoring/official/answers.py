"""The official readers of non-letter answers (numbers, spans, yes/no, open text) and TempCompass's match rules,
each reimplemented rule for rule from the benchmark's own code, quirks included."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

# ------------------------------------------------------------------------------ VSI-Bench (lmms-eval vsibench)

_VSI_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_VSI_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())} | {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
                                               "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
                                               "thousand": 1000}


def vsi_extract_number(text: str) -> float | None:
    """The first number of the response, in digits or as a run of number words, whichever comes first."""
    s = str(text).strip().lower()
    if not s:
        return None
    digit = _VSI_NUMBER.search(s)
    run_start, run = None, []
    for m in re.finditer(r"[a-z]+", s):
        tok = m.group(0)
        if run_start is None:
            if tok in _VSI_WORDS:
                run_start, run = m.start(), [tok]
        elif tok == "and":
            continue
        elif tok in _VSI_WORDS:
            run.append(tok)
        else:
            break
    if digit is not None and (run_start is None or digit.start() < run_start):
        return float(digit.group(0))
    if run_start is None:
        return None
    total = current = 0
    for tok in run:
        val = _VSI_WORDS[tok]
        if val == 100:
            current = max(current, 1) * 100
        elif val == 1000:
            total += max(current, 1) * 1000
            current = 0
        else:
            current += val
    return float(total + current)


def vsi_fuzzy_letter(response: str) -> str:
    """VSI-Bench multiple choice: the first space-separated token, trailing dots removed ("(C)" stays "(C)")."""
    return response.split(" ")[0].rstrip(".").strip()


# ------------------------------------------------------------------ Charades-STA (lmms-eval charades_sta)

_TG_EXAMPLE = "A specific example is : 20.8 - 30.0 seconds".lower()
_TG_KEYWORDS = ("starts", "ends", "happens in", "start time", "end time", "start", "end", "happen")
_CLOCK_RANGE = re.compile(r"\b(\d{1,2}:\d{2}(?::\d{2})?)\s*[–-]\s*(\d{1,2}:\d{2}(?::\d{2})?)\b")
_NUM_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)")
_NUM = re.compile(r"\b(\d+(?:\.\d+)?)\b")
_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}(?::\d{2})?)\b")
_FALLBACK = re.compile(r"(\d+(?:\.\d+)?)\s*s?\s*[–-]\s*(\d+(?:\.\d+)?)\s*s?")


def _clock(t: str) -> float:
    parts = [float(p) for p in t.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


def _pairs(values: list[float]) -> list[tuple[float, float]]:
    values = values[: len(values) // 2 * 2]
    return [(values[i], values[i + 1]) for i in range(0, len(values), 2)]


def charades_extract_time(paragraph: str) -> list[tuple[float, float]]:
    """lmms-eval's `extract_time`: at most one span, swapped when inverted. Note "to" becomes "-" everywhere
    (also inside words), and sentences split at "!", "?" and newlines, not at periods."""
    text = paragraph.lower().replace(_TG_EXAMPLE, "").replace("to", "-")
    sentences = re.split(r"[!?\n]", text)
    cands = [s for s in sentences if any(k in s for k in _TG_KEYWORDS)] or sentences
    spans = (_first_ranges(cands, _CLOCK_RANGE, _clock) or _first_ranges(cands, _NUM_RANGE, float)
             or _pairs([_clock(t) for s in cands for t in _CLOCK.findall(s)])
             or _pairs([float(found[0]) for s in cands for found in [_NUM.findall(s)] if found])
             or _first_ranges(cands, _FALLBACK, float))
    return [(a, b) if b > a else (b, a) for a, b in spans[:1]]


def _first_ranges(sentences: list[str], pattern: re.Pattern, convert) -> list[tuple[float, float]]:
    """Every range of the first sentence in which `pattern` finds one."""
    for s in sentences:
        found = pattern.findall(s)
        if found:
            return [(convert(a), convert(b)) for a, b in found]
    return []


def charades_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """lmms-eval's IoU: 0 when the union is empty (two identical points score 0, not 1)."""
    denom = max(a[1], b[1]) - min(a[0], b[0])
    return 0.0 if denom <= 0 else max(min(a[1], b[1]) - max(a[0], b[0]), 0) / denom


# ------------------------------------------------------------------------ Video-MMMU (lmms-eval videommmu)

_KEY_INDICATORS = (
    "could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ", "are ", "in total ", "total ",
    "identify ", "recognize ", "calculated as ", "counted as ", "measured as ", "observed as ", "concluded as ",
    "found to be ", "equals ", "determined to be ", "number of ", "value is ", "adds up to ", "have ", "has ",
)
_TRIVIAL = {":", ",", ".", "!", "?", ";", "'"}


def _is_number(s: str) -> bool:
    try:
        float(s.replace(",", ""))
        return True
    except ValueError:
        return False


def mmmu_normalize(s: str) -> list:
    """A number becomes [round(x, 2)]; a one-character string is padded both ways; other text is lower-cased."""
    s = s.strip()
    if _is_number(s):
        return [round(float(s.replace(",", "")), 2)]
    s = s.lower()
    return [" " + s, s + " "] if len(s) == 1 else [s]


def mmmu_extract_numbers(s: str) -> list[str]:
    commas = re.findall(r"-?\b\d{1,3}(?:,\d{3})+\b", s)
    scientific = re.findall(r"-?\d+(?:\.\d+)?[eE][+-]?\d+", s)
    simple = re.findall(r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])", s)
    return commas + scientific + simple


def mmmu_open_response(response: str) -> list | None:
    """The key parts of an open answer: per line, the shortest tail after a conclusion word ("is ", "so ", ...;
    "=" too on the last line), plus every number in them, normalised. None for an empty response."""
    if response in ("", "API Error"):
        return None
    text = response.strip().strip(".").lower()
    lines = re.split(r"\.\s(?=[A-Z])|\n", text)  # after lower() only the newline split can fire
    keys = []
    for i, line in enumerate(lines):
        indicators = _KEY_INDICATORS + (("=",) if i == len(lines) - 1 else ())
        shortest = None
        for ind in indicators:
            if ind in line:
                tail = line.split(ind)[-1].strip()
                if not shortest or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest.strip() not in _TRIVIAL:
            keys.append(shortest)
    if not keys:
        keys = [text]
    preds = list(keys)
    for key in keys:
        preds.extend(mmmu_extract_numbers(key))
    return list({p for raw in preds for p in mmmu_normalize(raw)})


def mmmu_eval_open(gold: str, preds: list) -> bool:
    answers = mmmu_normalize(gold)
    for pred in preds:
        if isinstance(pred, str):
            if any(isinstance(a, str) and a in pred for a in answers):
                return True
        elif pred in answers:
            return True
    return False


# -------------------------------------------------------------- OVO-Bench (JoeLeelyf/OVO-Bench OVOBenchScore)


def ovo_rec_correct(response: str, count: int) -> bool:
    """REC: every digit of the response concatenated must equal the count ("3 times in 2 rounds" reads 32)."""
    return "".join(re.findall(r"\d+", response)) == str(count)


def ovo_yes_no_correct(response: str, truth_yes: bool) -> bool:
    """SSR/CRR: the exact letter "Y"/"N", or the substring "Yes"/"No" ("Not sure" counts as No)."""
    if response == ("Y" if truth_yes else "N"):
        return True
    return ("Yes" if truth_yes else "No") in response


# ------------------------------------------------------------------------------ MMVU open-ended (rule part)

_SUPERSCRIPTS = str.maketrans({"²": "^2", "³": "^3", "¹": "^1", "⁰": "^0", "⁴": "^4", "⁵": "^5", "⁶": "^6",
                               "⁷": "^7", "⁸": "^8", "⁹": "^9"})


def mmvu_open_rule(prediction: str, answer: str) -> bool:
    """MMVU's rule-based open-ended check (a False sends the item to the LLM judge)."""
    pred = str(prediction).strip().lower().translate(_SUPERSCRIPTS)
    gold = str(answer).strip().lower().translate(_SUPERSCRIPTS)
    p, g = " ".join(pred.split()), " ".join(gold.split())
    if p == g or g in p or p in g:
        return True
    pn, gn = re.findall(r"\d+\.?\d*", pred), re.findall(r"\d+\.?\d*", gold)
    if pn and gn and abs(float(gn[0]) - float(pn[0])) < 0.01:
        return True
    gw = [w.strip(string.punctuation) for w in g.split() if w.strip(string.punctuation)]
    pw = [w.strip(string.punctuation) for w in p.split() if w.strip(string.punctuation)]
    if 2 <= len(gw) <= 5 and all(w in pw for w in gw if len(w) > 2):
        return True
    po, go = re.search(r"O\s*\([^)]+\)", p, re.I), re.search(r"O\s*\([^)]+\)", g, re.I)
    return bool(po and go and po.group(0).lower().translate(_SUPERSCRIPTS) == go.group(0).lower().translate(
        _SUPERSCRIPTS))


# ---------------------------------------------------------------------------------- TempCompass (rules only)


def tempcompass_multi_choice(pred: str, answer: str) -> int | None:
    """1/0 when a hand-written rule matches, None when the official code asks ChatGPT instead."""
    if pred == answer:
        return 1
    if pred in ("A", "B", "C", "D"):
        return int(pred == answer[:1])
    for sep in (".", ")"):
        if any(pred.startswith(f"{c}{sep}") for c in "ABCD"):
            return int(pred.split(sep)[0] == answer[:1])
    return None


def tempcompass_yes_no(pred: str, answer: str) -> int | None:
    low = pred.lower()
    read = "yes" if low.startswith("yes") else "no" if low.startswith("no") else None
    return None if read is None else int(read == answer)


def tempcompass_caption_matching(pred: str, question: str, answer: str) -> int | None:
    """The caption-matching rules over the question's "Caption A: ..." option lines. None: rules fail (judge)."""
    lines = question.split("\n")[1:]
    try:
        sents = [o.split(": ")[1] for o in lines]
    except IndexError:
        return None  # the official code raises on an option line without ": "; such an item cannot be ruled
    heads = [o.split(": ")[0] for o in lines]
    inds = heads + [h.replace("Sentence ", "").replace("Option ", "").replace("Caption ", "") for h in heads]
    read = None
    for o in lines:
        if o == pred:
            read = o
    for sent in sents:
        if sent == pred or (") " in pred and sent == pred.split(") ")[1]):
            read = sent
    for ind in inds:
        if ind == pred or ind == pred.replace(".", ""):
            read = ind
    if read is None:
        return None
    parts = answer.split(": ")
    head_words = parts[0].split()
    return int(read == answer or read == answer.split(":")[0] or (len(parts) > 1 and read == parts[1])
               or (len(head_words) > 1 and read == head_words[1]))


# ---------------------------------------------------------------------- ST-Align STVG (LLaVA-ST eval_stvg)

_ST_TOKEN = re.compile(r"<(?:WIDTH|HEIGHT|TEMP)-(\d+)>")
_ST_SPAN = re.compile(r"{\s*(\d+(?:\.\d+)?)\,\s*(\d+(?:\.\d+)?)\s*}")
_ST_NUM = r"(\d+(?:\.\d+)?)"
_ST_PAIR = re.compile(_ST_NUM + r"\,\:\s*\[" + r",\s*".join([_ST_NUM] * 4) + r"\]")


def _st_tokens(text: str, as_index: bool) -> str:
    """LLaVA-ST `replace_and_normalize`: each <TEMP-k>/<WIDTH-k>/<HEIGHT-k> becomes "k," (or "k/99," to 5 places)."""
    out = _ST_TOKEN.sub(lambda m: f"{int(m.group(1))}," if as_index else f"{int(m.group(1)) / 99.0:.5f},", text)
    return out.replace(",]", "]").replace(",}", "}")


def _st_iou(a: Sequence[float], b: Sequence[float]) -> float:
    inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union != 0 else 0


def llava_st_item(output: str, split: Sequence[int], width: float, height: float, gt_span: Sequence[int],
                  gt_boxes: dict[str, Sequence[float]], num_frames: int = 100) -> dict[str, float]:
    """One item of `eval_stvg`: the prediction's special tokens (0-99 grid over the clip's `split` frames and the
    frame size) mapped to frame indices and pixels; tiou on the clip-normalised span, siou / viou over the frames
    both sides have / either side has. Outputs in any other format read as no prediction."""
    duration = split[1] - split[0] + 1
    span = _ST_SPAN.search(_st_tokens(output, as_index=False))
    pred_span = [float(span.group(1)), float(span.group(2))] if span else [0.0, 0.0]
    gt = [round((i - split[0]) / (duration - 1), 3) for i in gt_span]
    lo, hi = min(gt[0], pred_span[0]), max(gt[1], pred_span[1])
    tiou = max(0.0, (min(gt[1], pred_span[1]) - max(gt[0], pred_span[0])) / (hi - lo)) if hi - lo else 0.0
    # two dicts as `parse_stpair_from_text` then `eval_stvg` build them: by token (a repeated token keeps its first
    # place and its last box), then by frame, where tokens sharing a frame (clips under 100 frames) leave the box
    # of the token that comes last in that order
    by_token: dict[float, list[float]] = {}
    for m in _ST_PAIR.finditer(_st_tokens(output, as_index=True).replace(" ", "")):
        by_token[float(m.group(1))] = [float(m.group(i)) / 99 for i in range(2, 6)]
    pred: dict[str, list[int]] = {}
    for k, v in by_token.items():
        frame = str(round(split[0] + k / (num_frames - 1) * (duration - 1)))
        pred[frame] = [round(v[0] * width), round(v[1] * height), round(v[2] * width), round(v[3] * height)]
    gt_boxes = {str(k): b for k, b in gt_boxes.items()}
    shared = set(gt_boxes) & set(pred)
    total = sum(_st_iou(gt_boxes[k], pred[k]) for k in shared)
    return {"tiou": tiou, "siou": total / max(len(shared), 1), "viou": total / max(len(set(gt_boxes) | set(pred)), 1),
            "n_pred_frames": len(pred)}


# ------------------------------------------------------- VideoReasonBench (llyx97/video_reason_bench eval_utils)

_VRB_FINAL = re.compile(r"Final Answer\s*(.*?)\s*$", re.S)
_KIMI_THINK_END = "\u25c1/think\u25b7"  # Kimi's end-of-thinking mark, which the official code splits on


def vrb_final_answer(response: str) -> str | None:
    """`extract_final_answer`: after Kimi's think mark (the text up to the next one), the text following the first
    "Final Answer" (its colon included); None when there is none or nothing follows it: the official `evaluate`
    then returns False before any judge runs."""
    if not response:
        return None
    if _KIMI_THINK_END in response:
        response = response.split(_KIMI_THINK_END)[1]
    m = _VRB_FINAL.search(response)
    return (m.group(1) or None) if m else None
