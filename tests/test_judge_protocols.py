"""Per-benchmark judging protocols (scoring/judges): prompt rendering and reply parsing against hand-made fixtures,
VideoReasonBench's state simulator, the `needs judge` headline, and full judge passes with the tiny model through
the shared vLLM server (openai backend) and, as a slow variant, the HF backend (multi-step protocols included)."""

from __future__ import annotations

import json

import pytest
from conftest import SERVED, SERVER_GROUP
from test_leaderboard_runs import make_run

from vbench_async.backends.openai import ServerSettings
from vbench_async.benchmarks import get_benchmark
from vbench_async.evaluation.judge_pass import JudgeConfig, judge_run_dir
from vbench_async.results.lines import read_lines
from vbench_async.results.verdicts import answer_hash, apply_judgements
from vbench_async.sample_result import Result
from vbench_async.samples import Sample
from vbench_async.scoring.judges import (
    JUDGES,
    NEEDS_FIELDS,
    UNPARSABLE,
    Ask,
    JudgeItem,
    Outcome,
    tempcompass,
    vcrbench,
    videommlu,
)
from vbench_async.scoring.judges import videoreasonbench as vrb
from vbench_async.scoring.judges.mmvu import parse_binary


def item(benchmark: str, question: str, answer: str, output: str, **kw) -> JudgeItem:
    return JudgeItem(sample_id="s", benchmark=benchmark, question=question, reference=answer, output=output,
                     answer=f"<answer>{answer}</answer>", **kw)


def run(protocol, it: JudgeItem, *rounds: list[str]) -> tuple[Outcome, list[list[Ask]]]:
    """Drive a protocol with hand-written judge replies, one list per round."""
    step, seen = protocol.start(it), []
    for replies in rounds:
        assert isinstance(step, list), step
        seen.append(step)
        step = protocol.advance(it, step, replies)
    assert isinstance(step, Outcome), step
    return step, seen


# ---------------------------------------------------------------------------------------------- VideoReasonBench

VRB = JUDGES["videoreasonbench"]


@pytest.mark.parametrize("response, final", [
    ("reasoning...\nFinal Answer: 1st: Queen of Clubs", ": 1st: Queen of Clubs"),
    ("Final Answer: A\nlater Final Answer: B", ": A\nlater Final Answer: B"),  # the first one, to the end
    ("think\u25c1/think\u25b7Final Answer:  x  ", ":  x"),  # only the trailing space goes
    ("no final answer here", None),
    ("Final Answer", None),
    ("", None),
])
def test_vrb_final_answer_is_the_official_extraction(response, final):
    assert vrb.final_answer(response) == final


def test_vrb_judge_prompt_and_verdicts():
    it = item("videoreasonbench", "Which cards?", "7 of Spades", "Final Answer: 7 of Spades", fields={"dim": "recall"})
    out, (asks,) = run(VRB, it, ["Correct"])
    assert out.score == 1.0 and asks[0].max_tokens == 16
    p = asks[0].prompt
    assert p.startswith("You will be given a question, a model response and a ground-truth answer.")
    assert "Question: Which cards?\n\nModel Response: : 7 of Spades\n\nGround-Truth Answer: 7 of Spades\n" in p
    assert p.endswith('Directly output "Correct" or "Incorrect":\n')
    assert run(VRB, it, ["Incorrect"])[0].score == 0.0
    assert run(VRB, it, [" **Correct**."])[0].score == 1.0
    bad = run(VRB, it, ["I am not sure"])[0]
    assert bad.score is None and bad.error["kind"] == UNPARSABLE
    no_final = VRB.start(item("videoreasonbench", "q", "x", "the answer is x", fields={"dim": "recall"}))
    assert isinstance(no_final, Outcome) and no_final.score == 0.0


def test_vrb_final_answer_none_is_not_credited_without_the_simulator():
    # The unified file writes the release's null answer as "None": a response "Final Answer: None" scored 1.0 by
    # ROUGE-L (and by a judge comparing it with "None"). Now it waits for the state simulator's fields.
    sample = Sample(benchmark="videoreasonbench", sample_id="6", task_type="open-ended",
                    question="Which operations?", answer="<answer>None</answer>", video="card/state1_op5_start.mp4")
    sc = get_benchmark("videoreasonbench").score(sample, "Final Answer: None")
    assert sc.official.value is None and sc.official.needs_judge
    it = JudgeItem.from_result({"sample_id": "6", "benchmark": "videoreasonbench", "question": sample.question,
                                "answer": sample.answer, "output": "Final Answer: None", "video": sample.video})
    out = VRB.start(it)
    assert isinstance(out, Outcome) and out.score is None and out.error["kind"] == NEEDS_FIELDS
    # With the release's fields an operation item never reaches the "Correct"/"Incorrect" prompt.
    fields = {"dim": "prediction_operation", "visible_time": "start", "num_state": 1, "states": {"cup0": [[20, 10]]}}
    asks = VRB.start(item("videoreasonbench", "q", "None", "Final Answer: None", fields=fields, video="chip/x.mp4"))
    assert [a.stage for a in asks] == ["extract_chip"] and "Extracted Operations:" in asks[0].prompt


def test_vrb_hub_record_carries_the_simulator_fields(tmp_path):
    """A record in the release's shape (null answer, recorded states) maps through the card's hub mapping to a sample
    whose operation item the simulator decides."""
    from vbench_async.benchmarks.hub import to_unified
    from vbench_async.samples import parse_record

    bench = get_benchmark("videoreasonbench")
    official = {"video": "videos/chip/state1_op1_start.mp4", "question": CHIP_Q, "answer": None,
                "dim": "prediction_operation", "num_state": 1, "num_operation": 1, "visible_time": "start",
                "actions": ["add 10 to cup0"], "states": {"cup0": [[20], [20, 10]]}, "_key": "op", "_file": "chip",
                "_index": 0, "_dir": "questions"}
    sample = parse_record(to_unified(official, bench.card.sources.hub.record, tmp_path), "videoreasonbench", 0)
    assert sample.answer == "<answer>None</answer>" and sample.fields["states"] == {"cup0": [[20], [20, 10]]}
    output = "Add a 5 chip.\nFinal Answer: add 5 to cup0"
    sc = bench.score(sample, output)
    line = {**sample.to_dict(), "output": output, "official": sc.official.to_dict(), "details": dict(sc.details)}
    out, (asks,) = run(VRB, JudgeItem.from_result(line), ["['add 5 to cup0']"])
    assert asks[0].stage == "extract_chip" and out.score == 1.0 and out.info["rule"] == "state simulator"


HRD_Q = ("The video presents a sliding puzzle on a 2x2 board. ... the desired number arrangement: "
         "`(a,1): 3, (a,2): 2, (b,1): 1, (b,2): 0`")
CHIP_Q = "Give operations to ensure that `cup0` contains exactly the following chips: `20, 10, 5`."
CARD_Q = "Give operations to ensure that `pile0` contains exactly the following cards from top to bottom: `8 of Clubs`"
FILE_Q = "Give commands to ensure that `path0` contains exactly the following files: `a.txt, c.py`"


@pytest.mark.parametrize("video, question, fields, reply, right", [
    ("hrd/x.mp4", HRD_Q, {"states": [[[1, 2], [3, 0]]], "visible_time": "start"}, "['up']", True),
    ("hrd/x.mp4", HRD_Q, {"states": [[[1, 2], [3, 0]]], "visible_time": "start"}, "['down', 'Up']", True),  # skip
    ("hrd/x.mp4", HRD_Q, {"states": [[[1, 2], [3, 0]]], "visible_time": "start"}, "['left']", False),
    ("hrd/x.mp4", HRD_Q, {"states": [[[1, 2], [3, 0]]], "visible_time": "start"}, "up, then done", False),
    ("chip/x.mp4", CHIP_Q, {"states": {"cup0": [[20, 10]]}, "num_state": 1, "visible_time": "start"},
     "['add 5 to cup0']", True),
    ("chip/x.mp4", CHIP_Q, {"states": {"cup0": [[20, 10]]}, "num_state": 1, "visible_time": "start"},
     "['remove 50 from cup0', 'add 5 to cup0']", False),
    ("chip/x.mp4", CHIP_Q, {"states": {"cup0": [[20, 10]]}, "num_state": 1, "visible_time": "start"},
     "['add 5 to cup1']", False),  # a cup the item lacks: wrong, not a crash
    ("card/x.mp4", CARD_Q, {"states": {"pile0": [["7 of Spades", "8 of Clubs"]]}, "num_state": 1,
                            "visible_time": "start"}, "['remove 7 of Spades from pile0']", True),
    ("card/x.mp4", CARD_Q, {"states": {"pile0": [["7 of Spades", "8 of Clubs"]]}, "num_state": 1,
                            "visible_time": "start"}, "['remove 8 of Clubs from pile0']", False),  # not the top
    ("file_sys/x.mp4", FILE_Q, {"states": {"path0": {"init": ["a.txt", "b.txt"]}}, "num_state": 1,
                                "visible_time": "start"}, "rm -rf path0/{b.txt} & touch path0/{c.py}", True),
    ("file_sys/x.mp4", FILE_Q, {"states": {"path0": {"init": ["a.txt", "b.txt"]}}, "num_state": 1,
                                "visible_time": "start"}, "rm -rf path0/{b.txt,c.py} & touch path0/{c.py}", False),
])
def test_vrb_state_simulator(video, question, fields, reply, right):
    it = item("videoreasonbench", question, "None", "... Final Answer: see above", video=video,
              fields={"dim": "prediction_operation", **fields})
    out, (asks,) = run(VRB, it, [reply])
    assert asks[0].max_tokens == 512 and "Model Response" in asks[0].prompt
    assert out.score == (1.0 if right else 0.0) and out.error is None


# ------------------------------------------------------------------------------------------------- VCR-Bench

VCR = JUDGES["vcrbench"]


def test_vcr_two_stage_protocol():
    it = item("vcrbench", "Why?", "D", "It must be D.", options=("A. one", "B. two", "C. three", "D. four"))
    out, (extract, match) = run(VCR, it, ["D"], ["1"])
    assert out.score == 1.0 and out.info["extracted"] == "D"
    e = extract[0].prompt
    assert e.startswith("You are an AI assistant who will help me to extract an answer of a question.")
    assert e.endswith("\nQuestion: Why?\nA. one\nB. two\nC. three\nD. four\nAnswer: It must be D.\nYour output:\n")
    assert "\x0crac" in e  # the official literal's "\frac", as Python evaluates it
    m = match[0].prompt
    assert m.startswith("You are an AI assistant who will help me to judge whether two answers are consistent.")
    assert m.endswith("[Model Answer]: D\n[Standard Answer]: D\nYour output:\n")
    assert run(VCR, it, ["B"], ["0"])[0].score == 0.0
    assert run(VCR, it, ["B"], ["maybe"])[0].error["kind"] == UNPARSABLE


@pytest.mark.parametrize("truth, extracted, right", [
    ("[10, 20]", "[10,19]", True),     # tIoU 0.9 > 0.7: no second prompt
    ("[10, 20]", "[10, 16]", False),   # tIoU 0.6
    ("[0, 0, 10, 10]", "[0, 0, 10, 9]", True),
    ("[0, 0, 10, 10]", "[5, 5, 15, 15]", False),
])
def test_vcr_geometric_answers_are_matched_by_rule(truth, extracted, right):
    out, rounds = run(VCR, item("vcrbench", "When?", truth, "..."), [extracted])
    assert len(rounds) == 1 and out.score == (1.0 if right else 0.0)


# ------------------------------------------------------------------------------------------------- Video-MMLU

MMLU = JUDGES["videommlu"]


def test_videommlu_answers_questions_from_the_caption_then_grades():
    qa = [{"question": "What is differentiated?", "answer": "ln(e^x/(e^x-1))"},
          {"question": "What is the result?", "answer": "-1/(e^x-1)"}]
    it = item("videommlu", "", "reference caption", "A lecture deriving -1/(e^x-1).", fields={"qa": qa})
    out, (answers, grades) = run(MMLU, it, ["a log", "-1/(e^x-1)"],
                                 ["{'pred': 'no', 'score': 1}", '```python\n{"pred": "yes", "score": 5}\n```'])
    assert out.score == 0.5 and out.info == {"n_questions": 2, "n_graded": 2, "mean_rating": 3.0}
    assert ("detailed description: A lecture deriving -1/(e^x-1).\nquestion: What is differentiated?"
            in answers[0].text())
    assert answers[0].text().startswith("You are an intelligent chatbot designed for providing accurate answers")
    assert "Predicted Answer: -1/(e^x-1)" in grades[1].prompt and "Correct Answer: -1/(e^x-1)" in grades[1].prompt
    assert "{'pred': 'yes', 'score': 4.8}" in grades[0].prompt
    assert run(MMLU, it, ["a", "b"], ["no idea", "{'pred': 'yes', 'score': 4}"])[0].score == 1.0  # one readable
    assert run(MMLU, it, ["a", "b"], ["?", "?"])[0].error["kind"] == UNPARSABLE
    # A rating that is not a number: the yes still counts, the mean rating is over the numeric ones only.
    odd = run(MMLU, it, ["a", "b"], ["{'pred': 'Yes', 'score': 'high'}", "{'pred': 'no', 'score': 2}"])[0]
    assert odd.score == 0.5 and odd.info == {"n_questions": 2, "n_graded": 2, "mean_rating": 2.0}
    assert MMLU.start(item("videommlu", "", "caption", "mine")).error["kind"] == NEEDS_FIELDS  # the unified file


# ------------------------------------------------------------------------------------------ MMVU, TempCompass


@pytest.mark.parametrize("reply, verdict", [("1", True), ("0", False), ("Incorrect", False), ("CORRECT", True),
                                            ("[1]", True), ("hmm", None)])
def test_mmvu_binary_reply(reply, verdict):
    assert parse_binary(reply) is verdict


def test_mmvu_open_ended_prompt_and_rules_first():
    it = item("mmvu", "What is the complexity?", "O(n^2)", "<think>long</think>quadratic time")
    out, (asks,) = run(JUDGES["mmvu"], it, ["1"])
    assert out.score == 1.0
    assert asks[0].prompt.endswith("Question: Question: What is the complexity?\nCorrect Answer: O(n^2)\n"
                                   "Model Prediction: quadratic time")
    # The rules already credit an answer containing the truth: the official reading has a value, no judge is asked.
    s = Sample(benchmark="mmvu", sample_id="o", task_type="open-ended", question="q", answer="<answer>O(n^2)</answer>")
    assert get_benchmark("mmvu").score(s, "It is O(n^2).").official.value == 1.0


def test_tempcompass_rule_failures_and_captioning():
    mc = item("tempcompass", "How fast?", "B", "I think it is slower", task_type="multiple choice",
              options=("A. faster", "B. slower"), fields={"format": "multi-choice"})
    out, (asks,) = run(JUDGES["tempcompass"], mc, ["Correct, the prediction matches."])
    assert out.score == 1.0
    assert asks[0].text().startswith("You are an AI assistant for question answering.\n\n\n        You will receive a "
                                     "multi-choice question")
    assert asks[0].prompt.endswith("Multi-Choice Question:\nHow fast?\nA. faster\nB. slower\n"
                                   "Ground-Truth Answer: B. slower\nModel Prediction: I think it is slower")
    cap = item("tempcompass", "Describe the video.", "caption", "A car drives slowly to the left.",
               fields={"format": "captioning", "mc_question": "Which way?\nA. left\nB. right", "mc_answer": "A. left"})
    out, (asks,) = run(JUDGES["tempcompass"], cap, ["Reasoning: it says left.\nAnswer: A. left"])
    assert out.score == 1.0 and asks[0].prompt.endswith(
        "Video Description:A car drives slowly to the left.\nMulti-Choice Question:\nWhich way?\nA. left\nB. right\n"
        "Answer:")
    assert tempcompass.captioning_rating("Answer: A. left or B. right", "A. left")[0] == 0  # two letters named
    assert tempcompass.captioning_rating("Answer: None of the choices are correct", "A. left")[0] == 0
    no_fields = item("tempcompass", "Describe.", "caption", "text", fields={"format": "captioning"})
    assert JUDGES["tempcompass"].start(no_fields).error["kind"] == NEEDS_FIELDS


def test_prompt_hashes_pin_each_protocol():
    hashes = {name: j.prompt_hash for name, j in JUDGES.items()}
    assert len(set(hashes.values())) == len(hashes) and all(len(h) == 16 for h in hashes.values())
    assert vcrbench.EXTRACT_HEAD and videommlu.GRADE and vrb.JUDGE


# ------------------------------------------------------------------------------------------- needs judge


def test_needs_judge_covers_official_readings_and_keeps_the_headline_empty():
    sample = Sample(benchmark="vcrbench", sample_id="mc", task_type="multiple choice", question="Why?",
                    answer="<answer>B</answer>", options=("A. x", "B. y"))
    sc = get_benchmark("vcrbench").score(sample, "B")
    line = Result.read({"sample_id": "mc", "benchmark": "vcrbench", "task_type": "multiple choice", "score": sc.value,
                        "details": dict(sc.details), "official": sc.official.to_dict(), "robust": sc.robust.to_dict()})
    assert sc.robust.value == 1.0 and line.needs_judge()  # VCR-Bench judges every item, multiple choice too
    agg = get_benchmark("vcrbench").aggregate([line])
    assert agg["score"] is None and agg["headline_status"] == "needs judge" and agg["n_needs_judge"] == 1
    assert agg["offline_fallback"]["score"] == 1.0
    verdict = {"sample_id": "mc", "answer_hash": answer_hash(line), "prompt_hash": JUDGES["vcrbench"].prompt_hash,
               "verdict": "incorrect", "score": 0.0, "error": None, "judge_id": "j@1", "protocol": "vcrbench"}
    (judged,), info = apply_judgements([line], {"mc": verdict}, {"judge_id": "j@1"})
    assert info["n_judged"] == 1 and judged.score == 0.0  # the judged (official) value is the item's score
    assert judged.official == {**line.official, "value": 0.0, "needs_judge": False, "judged": True}
    assert judged.robust == line.robust  # the careful grader's reading stays beside it
    assert get_benchmark("vcrbench").aggregate([judged])["score"] == 0.0
    stale = {**verdict, "prompt_hash": "0" * 16}  # a verdict under other prompts no longer counts
    assert apply_judgements([line], {"mc": stale}, {})[1]["n_unjudged"] == 1


# ------------------------------------------------------------------------------------ end to end, real judge


def _judged_samples() -> dict[str, list[Sample]]:
    vrb_fields = {"dim": "prediction_operation", "visible_time": "start", "num_state": 1,
                  "states": {"cup0": [[20, 10]]}}
    return {
        "videoreasonbench": [
            Sample(benchmark="videoreasonbench", sample_id="fixed", task_type="open-ended", question="Which chips?",
                   answer="<answer>20, 10</answer>", video="chip/a.mp4", fields={"dim": "counting_state"}),
            Sample(benchmark="videoreasonbench", sample_id="op", task_type="open-ended", question=CHIP_Q,
                   answer="<answer>None</answer>", video="chip/b.mp4", fields=vrb_fields),
            Sample(benchmark="videoreasonbench", sample_id="nofinal", task_type="open-ended", question="Which?",
                   answer="<answer>20</answer>", video="chip/c.mp4", fields={"dim": "counting_state"})],
        "vcrbench": [Sample(benchmark="vcrbench", sample_id="mc", task_type="multiple choice", question="Why?",
                            answer="<answer>B</answer>", options=("A. x", "B. y"), video="v.mp4")],
    }


def _answers(sample: Sample, i: int) -> str:
    return {"fixed": "Final Answer: 20, 10", "op": "Final Answer: add 5 to cup0", "nofinal": "20", "mc": "B"}[
        sample.sample_id]


def _judge_end_to_end(tmp_path, monkeypatch, cfg: JudgeConfig) -> None:
    """Judge a run of VideoReasonBench (judge prompt, state simulator, the Final Answer rule) and VCR-Bench (two
    stages) with a real judge model, then judge it again from the cached verdicts."""
    import test_leaderboard_runs

    from vbench_async.benchmarks import score_sample

    monkeypatch.setattr(test_leaderboard_runs, "score", score_sample)  # as the runner scores: both readings
    samples = _judged_samples()
    run_dir = make_run(tmp_path / "run", "model-j", _answers, benchmarks=tuple(samples), samples=samples)
    before = json.loads((run_dir / "summary.json").read_text())["benchmarks"]
    assert all(b["score"] is None and b["headline_status"] == "needs judge" for b in before.values())

    summary = judge_run_dir(run_dir, cfg).to_json()
    assert summary["judge_pass"]["n_judged"] + summary["judge_pass"]["n_judge_failed"] == 4
    lines = {x["sample_id"]: x for f in (run_dir / "judge").glob("*.jsonl") for x in read_lines(f).values()}
    assert lines["nofinal"]["steps"] == [] and lines["nofinal"]["score"] == 0.0  # decided by the official rule
    assert [s["stage"] for s in lines["op"]["steps"]] == ["extract_chip"]
    assert lines["op"]["score"] is not None  # the simulator always decides once the judge listed anything (or not)
    assert lines["mc"]["steps"][0]["stage"] == "extract" and lines["mc"]["protocol"] == "vcrbench"
    assert lines["fixed"]["protocol"] == "videoreasonbench" and lines["fixed"]["steps"][0]["stage"] == "judge"
    for x in lines.values():
        assert x["prompt_hash"] == JUDGES[x["benchmark"]].prompt_hash
        assert (x["score"] is None) == bool(x["error"])
    vrb_block = summary["benchmarks"]["videoreasonbench"]
    assert vrb_block["judge"]["n_judged"] + vrb_block["judge"]["n_judge_failed"] == 3
    assert (vrb_block["score"] is None) == bool(vrb_block.get("n_needs_judge"))

    again = judge_run_dir(run_dir, cfg).to_json()  # cached verdicts: nothing asked again
    assert again["judge_pass"]["n_skipped"] == 4 and again["judge_pass"]["n_judged"] == 0


@pytest.mark.vllm
@SERVER_GROUP
def test_judge_protocols_through_real_vllm_server(vllm_server, tmp_path, monkeypatch):
    _judge_end_to_end(tmp_path, monkeypatch, JudgeConfig(model=SERVED, backend="openai", max_tokens=4, concurrency=4,
                                                         server=ServerSettings(base_url=vllm_server)))


@pytest.mark.slow
def test_judge_protocols_through_real_hf_backend(tmp_path, monkeypatch):
    _judge_end_to_end(tmp_path, monkeypatch, JudgeConfig(model="tiny-qwen2.5-vl", backend="hf", max_tokens=4,
                                                         concurrency=2))
