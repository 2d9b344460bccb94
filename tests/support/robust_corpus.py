"""Generates tests/fixtures/robust_corpus.jsonl: realistic model outputs per answer kind with careful-grader labels.

Every output is written from a template whose meaning is known (the label is the score a careful reader gives:
the intended answer against the truth, by the task's metric), filled with varied questions, options, numbers,
spans and phrasings. Run `python tests/support/robust_corpus.py` to rewrite the file; the test reads the file.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "robust_corpus.jsonl"
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]

# ------------------------------------------------------------------------------------------ multiple choice

MC_ITEMS = [
    ("What does the woman pick up first?", ["a red cup", "a blue towel", "a wooden spoon", "a glass jar"]),
    ("Where does the dog go after the gate opens?", ["into the garden", "under the table", "onto the sofa",
                                                       "back to the car", "out of the frame"]),
    ("Why does the man stop running?", ["he drops his phone", "the light turns red", "a friend calls him",
                                        "he is out of breath"]),
    ("Which tool is used to cut the board?", ["a hand saw", "a chisel", "a laser cutter", "scissors"]),
    ("What happens right after the whistle?", ["the players line up", "the crowd leaves", "the ball is kicked off",
                                               "the referee sits down", "it starts to rain"]),
    ("How is the cake decorated?", ["with strawberries", "with chocolate chips", "with candles only",
                                    "with powdered sugar"]),
    ("What is the weather like at the end of the video?", ["sunny", "snowing", "foggy", "raining heavily"]),
    ("Which direction does the camera pan?", ["left to right", "right to left", "upwards", "downwards"]),
]
MC_RIGHT = [
    "{T}", "{T}.", "({T})", "{T})", "**{T}**", "Answer: {T}", "The answer is {T}.",
    "The correct answer is ({T}) {text}.",
    "{T}. {text}", "{T}: {text}", "I'd pick {T}.", "I would go with {T}.", "I choose {T}.", "My answer: {T}",
    "Option {T} is correct.", "{T} is correct.", "<answer>{T}</answer>",
    "<think>Option {W} does not match what happens "
    "in the clip.</think>\n{T}", "Final answer: {T}", "{text}", "Based on the video, the answer is {T}.",
    "After watching the clip, I believe the best option is {T}.", "{W} is incorrect. The correct one is {T}.",
    "Not {W}. The answer is {T}.", "It can't be {W}; the answer is {T}.", "{W} is wrong, so the answer is {T}.",
    "Therefore, the final answer is: {T}", "\\boxed{{{T}}}", "The best answer is {T}.", "{T} - {text}",
    "Looking at the frames, {text}. So the answer is {T}.", "{W} can be ruled out. The right answer is {T}.",
    "The correct option is {T}.", "{T}, because {text} is what the video shows.", "**Answer:** {T}",
    "Option ({T})", "The answer is {T}: {text}.", "I'm fairly confident it's {T}.", "Answer - {T}",
    "Between {W} and {T}, the video clearly shows {T}.", "{lower}", "The best choice here is {T}.",
    "Watching the end of the clip, {text} is what happens, so I'd say {T}.",
]
MC_WRONG = [
    "{W}", "The answer is {W}.", "{T} or {W}", "{W} or {T}", "Either {T} or {W}.", "I can't tell from the video.", "",
    "None of the options fit.", "<think>The answer is {T}.</think>", "<think>It is probably {T}, but let me check",
    "{T} is incorrect. The correct one is {W}.", "Not {T}. The answer is {W}.", "Both {T} and {W} seem possible.",
    "I'd pick {W}.", "{W}. {wtext}", "{wtext}", "It can't be {T}; the answer is {W}.",
    "{T} is wrong, so the answer is {W}.",
    "The video does not show enough to decide.", "**Answer:** {W}", "Option ({W})", "I'm torn between {T} and {W}.",
]


def multiple_choice(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        question, texts = rng.choice(MC_ITEMS)
        letters = [chr(65 + k) for k in range(len(texts))]
        t = rng.randrange(len(texts))
        w = rng.choice([k for k in range(len(texts)) if k != t])
        right = i % 2 == 0
        tmpl = rng.choice(MC_RIGHT if right else MC_WRONG)
        output = tmpl.format(T=letters[t], W=letters[w], text=texts[t], wtext=texts[w], lower=letters[t].lower())
        record = {"problem_type": "multiple choice", "problem": question, "options": [f"{L}. {x}" for L, x in
                  zip(letters, texts)], "solution": f"<answer>{letters[t]}</answer>"}
        out.append(_line("mc", i, record, output, 1.0 if right else 0.0, tmpl))
    return out


# --------------------------------------------------------------------------------------------------- numbers

COUNT_RIGHT = [
    "{N}", "{N}.", "{w}", "{W}.", "There are {N} {obj}.", "I count {w} {obj} in total, though {k} are partly hidden.",
    "The answer is {N}.", "Answer: {N}", "<answer>{N}</answer>", "{N} times", "It happens {w} times.",
    "In total: {N}", "First I counted {m}, but actually there are {N}.", "After recounting, the total is {N}.",
    "Total = {N}", "I see {w} {obj}, and {k} of them are moving.", "{W} {obj} are visible.",
    "There are {N} {obj} ({k} on the left, {r} on the right).", "The count is {N}.", "Exactly {N}.",
    "<think>I see {k} near the door and {r} by the window.</think>\n{N}", "Therefore, the final answer is: {N}",
    "My count: {N} {obj}.", "{N} {obj} appear in the video, although {k} leave early.", "There were {N}.",
    "{N} in total.", "The total count is {w}.", "**{N}**", "The person does it {N} times in the clip.",
    "Counting carefully frame by frame, I get {N}.",
]
COUNT_WRONG = [
    "{m}", "There are {m} {obj}.", "{N} or {m}", "{m} or {N}", "Either {N} or {m}.", "About {N} or {m}.",
    "Between {N} and {mm} {obj}.", "I can't count them reliably.", "", "<think>There are {N}.</think>",
    "The answer is {m}.", "I count {wm} {obj} in total, though {N} are partly hidden.", "{N} to {mm}",
    "Roughly {N}-{mm}.", "At least {m}, maybe more.", "**{m}**",
]
OBJECTS = ["chairs", "people", "cars", "birds", "cups", "jumps", "balls", "books"]


def counting(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        truth = rng.randint(3, 12)
        k = rng.randint(1, truth - 1)
        r = truth - k
        m = rng.choice([x for x in range(2, 13) if x != truth])
        mm = truth + rng.randint(1, 3)
        right = i % 2 == 0
        tmpl = rng.choice(COUNT_RIGHT if right else COUNT_WRONG)
        output = tmpl.format(N=truth, w=WORDS[truth], W=WORDS[truth].capitalize(), k=k, r=r, m=m, mm=mm,
                             wm=WORDS[m], obj=rng.choice(OBJECTS))
        record = {"problem_type": "counting", "problem": "How many are there?", "options": [],
                  "solution": f"<answer>{truth}</answer>"}
        out.append(_line("number", i, record, output, 1.0 if right else 0.0, tmpl))
    return out


FRACTIONS = [("1/2", 0.5), ("3/4", 0.75), ("1/4", 0.25), ("2/5", 0.4), ("3/5", 0.6), ("1/5", 0.2)]
NUMERIC_RIGHT = [
    "The ratio is {f}.", "{f}", "It is {f} of the total.", "The answer is {d}.", "{d}", "Approximately {d}.",
    "The fraction is {f}, that is {d}.", "<answer>{d}</answer>", "About {p}% of the frames, so {d}.",
]
NUMERIC_WRONG = ["The ratio is {wf}.", "{wd}", "Either {d} or {wd}.", "{f} or {wf}", "I am not sure.", ""]


def numerical(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        (f, d), (wf, wd) = rng.sample(FRACTIONS, 2)
        right = i % 2 == 0
        tmpl = rng.choice(NUMERIC_RIGHT if right else NUMERIC_WRONG)
        output = tmpl.format(f=f, d=d, wf=wf, wd=wd, p=round(d * 100))
        record = {"problem_type": "numerical", "problem": "What share of the frames show the ball?", "options": [],
                  "solution": f"<answer>{d}</answer>"}
        out.append(_line("number", 10000 + i, record, output, 1.0 if right else 0.0, tmpl))
    return out


def mra(pred: float, truth: float) -> float:
    """VSI-Bench's MRA as its paper defines it: the share of the 10 levels 0.50, 0.55, ..., 0.95 with
    |pred - truth| / truth < 1 - level, in exact decimal arithmetic."""
    from fractions import Fraction

    err = abs(Fraction(str(pred)) - Fraction(str(truth))) / Fraction(str(truth))
    return sum(err < Fraction(100 - 50 - 5 * k, 100) for k in range(10)) / 10


REGRESSION_FORMS = ["{p}", "About {p} meters.", "The distance is roughly {p} m.", "<answer>{p}</answer>",
                    "I estimate {p}.", "It is approximately {p} meters long.", "The answer is {p}."]


def regression(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        truth = rng.choice([4, 5, 8, 10, 20, 2.5, 3.2])
        pred = rng.choice([truth, truth + 1, truth - 1, truth * 1.25, truth * 0.8, truth * 2, truth + 0.5])
        pred = round(pred, 2)
        tmpl = rng.choice(REGRESSION_FORMS)
        record = {"problem_type": "regression", "problem": "How long is the table in meters?", "options": [],
                  "solution": f"<answer>{truth}</answer>"}
        out.append(_line("number", 20000 + i, record, tmpl.format(p=f"{pred:g}"), mra(pred, truth), tmpl))
    return out


# ---------------------------------------------------------------------------------------------------- yes/no

YES = ["Yes", "yes.", "Yes, it is.", "Absolutely.", "Definitely.", "Certainly.", "Of course.", "Sure.", "Yep.",
       "That's correct.", "Correct.", "Indeed.", "It has been completed.", "Yes, the step is done.",
       "<answer>Yes</answer>", "The answer is yes.", "I believe so.", "I think so.", "Affirmative.",
       "Yes, they are.", "Yeah.", "Absolutely, yes.", "It has been finished.", "Yes. The person is doing it now.",
       "**Yes**", "Yes, definitely.", "Y", "True.", "Certainly, the step is being performed."]
NO = ["No", "no.", "No, it isn't.", "I don't think so.", "Definitely not.", "Not at all.", "Nope.", "Not yet.",
      "It has not been completed yet.", "Of course not.", "Absolutely not.", "Certainly not.", "I do not think so.",
      "Incorrect.", "The answer is no.", "Negative.", "No, they are not.", "It hasn't been completed.",
      "No. Nothing like that happens.", "**No**", "N", "False.", "No, not yet.", "Definitely not, no."]
UNSURE = ["Yes and no.", "I'm not sure.", "Maybe.", "It's hard to tell.", "", "<think>Yes</think>", "Yes or no?",
          "Possibly."]


def yes_no(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        truth = "Yes" if i % 2 == 0 else "No"
        pick = rng.random()
        if pick < 0.4:
            output, label, why = rng.choice(YES), 1.0 if truth == "Yes" else 0.0, "a yes"
        elif pick < 0.8:
            output, label, why = rng.choice(NO), 1.0 if truth == "No" else 0.0, "a no"
        else:
            output, label, why = rng.choice(UNSURE), 0.0, "no answer"
        task = rng.choice(["boolean", "SSR", "CRR"])
        record = {"problem_type": task, "problem": "Is the person performing this step now?", "options": [],
                  "solution": f"<answer>{truth}</answer>"}
        out.append(_line("yes_no", i, record, output, label, why))
    return out


# ----------------------------------------------------------------------------------------------------- spans

SPAN_FORMS = [
    '{{"time": [{s}, {e}]}}', '<answer>{{"time": [{s}, {e}]}}</answer>', "{s} - {e}", "From {s} to {e} seconds.",
    "It starts at {s} seconds and ends at {e} seconds.", "The event happens between {s}s and {e}s.", "[{s}, {e}]",
    "The event happens in the {s} - {e} seconds.", "{s}s to {e}s", "The moment spans {s} to {e} seconds.",
    "Start: {s}s, end: {e}s.", "It begins at {s} s and finishes at {e} s.", "({s}, {e})",
    '```json\n{{"time": [{s}, {e}]}}\n```', "The action occurs from {s} seconds to {e} seconds.",
]


def iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    if a == b:
        return 1.0
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return max(0.0, min(1.0, inter / union)) if union > 0 else 0.0


def spans(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        s = rng.choice([0, 1.5, 2, 3.2, 5, 7.5, 10, 12.5, 15])
        e = s + rng.choice([2, 3.5, 4, 6, 7.5, 10])
        shift = rng.choice([0, 0, 0, 1, -1, 2.5, 20])
        ps, pe = max(0.0, s + shift), e + shift
        tmpl = rng.choice(SPAN_FORMS)
        if rng.random() < 0.12:  # an inverted span: a careful reader swaps it
            output = tmpl.format(s=f"{pe:g}", e=f"{ps:g}")
        else:
            output = tmpl.format(s=f"{ps:g}", e=f"{pe:g}")
        label = iou((ps, pe), (s, e))
        if rng.random() < 0.08:
            output, label, tmpl = rng.choice(["I cannot find this moment in the video.", ""]), 0.0, "no span"
        record = {"problem_type": "temporal grounding", "problem": "the person opens the fridge", "options": [],
                  "solution": "<answer>" + json.dumps({"time": [s, e]}) + "</answer>"}
        out.append(_line("span", i, record, output, label, tmpl))
    return out


# ------------------------------------------------------------------------------------------------- free text

TEXTS = ["EXIT ONLY", "No Parking", "Welcome Home", "Fresh Bread Daily", "Platform 9", "Open 24 Hours",
         "Danger High Voltage", "Keep Left"]
TEXT_RIGHT = ["{t}", '"{t}"', 'The sign reads "{t}".', "**{t}**", "<answer>{t}</answer>", "{t}.",
              'It says "{t}".', "The text on screen is \"{t}\".", "{lower}", "Answer: {t}", "{upper}",
              'The words "{t}" appear on the sign.']
TEXT_WRONG = ["{o}", 'The sign reads "{o}".', "I cannot read the text.", "", "<think>It says {t}.</think>"]


def free_text(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        t, o = rng.sample(TEXTS, 2)
        while set(t.lower().split()) & set(o.lower().split()):
            o = rng.choice(TEXTS)
        right = i % 2 == 0
        tmpl = rng.choice(TEXT_RIGHT if right else TEXT_WRONG)
        output = tmpl.format(t=t, o=o, lower=t.lower(), upper=t.upper())
        label = 1.0 if right else 0.0
        record = {"problem_type": "OCR", "problem": "What does the sign say?", "options": [],
                  "solution": f"<answer>{t}</answer>"}
        out.append(_line("free_text", i, record, output, label, tmpl))
    return out


def _line(kind: str, i: int, record: dict, output: str, label: float, why: str) -> dict:
    record = {"data_type": "video", "data_source": "corpus", "path": f"v{i}.mp4", "problem_id": i, **record}
    return {"id": f"{kind}-{i:05d}", "kind": kind, "record": record, "output": output,
            "careful": {"score": label, "why": why}}


def build(seed: int = 29) -> list[dict]:
    rng = random.Random(seed)
    return (multiple_choice(rng, 400) + counting(rng, 220) + numerical(rng, 60) + regression(rng, 80)
            + yes_no(rng, 360) + spans(rng, 320) + free_text(rng, 320))


if __name__ == "__main__":
    lines = build()
    OUT.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    print(f"{len(lines)} lines -> {OUT}")
