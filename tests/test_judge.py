"""LLM judge: verdict parsing, applying verdicts, and a full pass through the real vLLM engine with the tiny model
(the shared vLLM server, through the openai backend: the judge is any served model)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO, SERVED, SERVER_GROUP
from test_leaderboard_runs import make_run

from vbench_async.backends.openai import ServerSettings
from vbench_async.benchmarks import get_benchmark
from vbench_async.cli import main
from vbench_async.errors import SampleError
from vbench_async.evaluation.judge_pass import JudgeConfig, judge_run_dir, resolve_identity
from vbench_async.results.lines import read_lines
from vbench_async.results.result_file import read_results
from vbench_async.results.verdicts import answer_hash, apply_judgements, judge_store
from vbench_async.sample_result import as_results
from vbench_async.samples import Sample
from vbench_async.scoring.judges import JUDGES, PROMPT_HASH, judge_prompt, parse_verdict, reference_text


@pytest.mark.parametrize("text, verdict", [
    ("VERDICT: CORRECT", True),
    ("verdict: incorrect", False),
    ("Verdict: **Correct**", True),
    ('{"verdict": "incorrect"}', False),
    ("Correct.", True),
    ("no", False),
    ("<think>it could be correct, or incorrect</think>VERDICT: INCORRECT", False),
    ("The model's answer is correct.", True),
    ("The answer is not correct.", False),
    ("Verdict: incorrect ... on reflection, Verdict: correct", True),  # the last explicit marker wins
    ("It is correct in part but incorrect overall", None),  # mixed signals: a judge failure, not a guess
    ("", None),
    ("banana banana", None),
    ("correctly", None),
])
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) is verdict


def test_prompt_shows_question_reference_and_answer():
    p = judge_prompt("What happens?", reference_text("<answer>The cat jumps.</answer>"), "A cat leaps.")
    assert "What happens?" in p and "The cat jumps." in p and "A cat leaps." in p and "<answer>" not in p
    assert len(PROMPT_HASH) == 16


def _line(sid: str, output: str, score: float, error=None) -> dict:
    return {"sample_id": sid, "benchmark": "vcrbench", "question": "q", "answer": "<answer>a</answer>",
            "output": output, "score": score, "error": error, "task_type": "open-ended",
            "details": {"needs_judge": True, "rouge_l": score}}


def test_apply_judgements_replaces_offline_scores_only_with_clear_verdicts():
    results = as_results([_line("ok", "x", 0.4), _line("bad", "y", 0.9), _line("unparsable", "z", 0.3),
                          _line("stale", "new text", 0.2),
                          _line("failed", "", None, {"kind": "engine_error", "message": "m"}),
                          {**_line("mc", "A", 1.0), "details": {}}])
    ident = {"judge_id": "j@1", "prompt_hash": PROMPT_HASH, "key": "k"}
    vcr = JUDGES["vcrbench"].prompt_hash

    def j(r, verdict, score, error=None):
        return {"sample_id": r.sample_id, "answer_hash": answer_hash(r), "verdict": verdict, "score": score,
                "error": error, "judge_id": "j@1", "prompt_hash": vcr}

    judgements = {"ok": j(results[0], "correct", 1.0), "bad": j(results[1], "incorrect", 0.0),
                  "unparsable": j(results[2], None, None, {"kind": "judge_unparsable", "message": "?"}),
                  "stale": j(replace(results[3], output="old text"), "correct", 1.0)}
    merged, info = apply_judgements(results, judgements, ident)
    by_id = {r.sample_id: r for r in merged}
    assert by_id["ok"].score == 1.0 and by_id["ok"].details["judge"]["offline_score"] == 0.4
    assert by_id["bad"].score == 0.0 and by_id["bad"].details["judge"]["judge_id"] == "j@1"
    assert by_id["unparsable"].score == 0.3  # keeps its offline score: a judge failure is not a zero
    assert by_id["unparsable"].details["judge_error"]["kind"] == "judge_unparsable"
    assert by_id["stale"].score == 0.2 and "judge" not in by_id["stale"].details  # answer changed since
    assert by_id["mc"] == results[5]
    assert info == {**ident, "n_judged": 2, "n_judge_failed": 1, "n_unjudged": 1}
    assert results[0].score == 0.4  # inputs untouched
    # the official aggregate counts what still needs a judge
    agg = get_benchmark("vcrbench").aggregate(merged)
    assert agg["n_needs_judge"] == 2 and agg["n_failed"] == 1


def _open_ended(n: int) -> list[Sample]:
    facts = ["The man opens the red door.", "Two dogs run across the field.", "She pours water into a glass.",
             "The car turns left at the light."]
    return [Sample(benchmark="vcrbench", sample_id=f"oe-{i}", task_type="open-ended",
                   question=f"What happens in clip {i}?", answer=f"<answer>{facts[i % 4]}</answer>",
                   video=f"clip{i // 2}.mp4", fields={"dimension": "event"}) for i in range(n)]


def _answers(sample: Sample, i: int) -> str | SampleError:
    if i == 3:
        return SampleError("video_missing", "clip1.mp4 not found")  # a failed sample: never sent to the judge
    return f"<answer>{['A man opens a door.', 'Dogs run.', 'Water is poured.', 'A car.'][i % 4]}</answer>"


def _recorded(run_dir, said: dict) -> tuple[JudgeConfig, dict]:
    """Verdict lines of an earlier pass of the tiny judge on disk (None: an unparsable reply); (config, results)."""
    block = json.loads((run_dir / "summary.json").read_text())["benchmarks"]["vcrbench"]
    results = read_results(run_dir / block["results_file"])
    cfg = JudgeConfig(model="tiny-qwen2.5-vl")
    _, identity = resolve_identity(cfg)
    with judge_store(run_dir, run_dir / block["results_file"], identity.key) as store:
        for sid, verdict in said.items():
            store.append({"sample_id": sid, "benchmark": "vcrbench", "judge_id": identity.judge_id,
                          "prompt_hash": JUDGES["vcrbench"].prompt_hash,
                          "answer_hash": answer_hash(results[sid]), "output": f"VERDICT: {verdict}",
                          "verdict": verdict, "score": None if verdict is None else float(verdict == "correct"),
                          "error": None if verdict else {"kind": "judge_unparsable", "message": "no 1/0 verdict"},
                          "info": {} if verdict else {"reply": "zq xv kk"}})
    return cfg, results


def test_recorded_verdicts_drive_the_summary_and_the_site(tmp_path, capsys):
    # Verdicts already on disk (an earlier pass of the same judge): the pass skips them without starting an engine,
    # and the summary and the site are recomputed with them.
    run_dir = make_run(tmp_path / "run", "model-oe", _answers, benchmarks=("vcrbench",),
                       samples={"vcrbench": _open_ended(6)})
    (run_dir / "leaderboard").mkdir()
    (run_dir / "leaderboard" / "index.html").write_text("old site")
    (run_dir / "leaderboard" / ".vbench-async-site").write_text('{"files": ["index.html"]}')  # an earlier build's
    cfg, results = _recorded(run_dir, {"oe-0": "correct", "oe-1": "correct", "oe-2": "incorrect", "oe-4": None,
                                       "oe-5": "correct"})
    _, identity = resolve_identity(cfg)
    summary = judge_run_dir(run_dir, cfg).to_json()
    earlier = [{"benchmark": "vcrbench", "sample_id": "oe-4", "kind": "judge_unparsable", "message": "no 1/0 verdict",
                "reply": "zq xv kk"}]
    assert summary["judge_pass"] == {"n_judged": 0, "n_judge_failed": 0, "failures": [], "n_skipped": 5,
                                     "n_skipped_failed": 1, "earlier_failures": earlier,  # oe-4: unparsable before
                                     "judge_id": identity.judge_id, "key": identity.key}
    capsys.readouterr()
    assert main(["judge", str(run_dir), "--judge-model", cfg.model]) == 0  # the command also rebuilds the site
    err = capsys.readouterr().err  # the failure's kind, its reason and what to do, not only a count
    assert "1 item(s) judged before without a usable verdict:" in err
    assert "  1 judge_unparsable: the judge's replies held no verdict its protocol reads" in err
    assert "--retry-failed" in err and "    vcrbench oe-4: no 1/0 verdict (the judge said: 'zq xv kk')" in err
    b = summary["benchmarks"]["vcrbench"]
    # oe-4 still needs a verdict, so the headline stays empty ("needs judge"): ROUGE never stands in for accuracy.
    # The offline figure beside it: three correct verdicts, one incorrect, oe-4's ROUGE-L, oe-3 failed (0), over 6
    assert b["score"] is None and b["headline_status"] == "needs judge"
    assert b["offline_fallback"]["score"] == pytest.approx((3 + results["oe-4"].score) / 6)
    assert b["n_needs_judge"] == 1 and b["judge"]["n_judged"] == 4 and b["judge"]["n_judge_failed"] == 1
    site = (run_dir / "leaderboard" / "index.html").read_text()
    assert "old site" not in site and "1 need judge" in site
    rows = json.loads((run_dir / "leaderboard" / "data" / "vcrbench.samples.json").read_text())
    assert {r["sample_id"]: r["judge_verdict"] for r in rows}["oe-2"] == "incorrect"


def test_a_judge_pass_without_one_usable_verdict_exits_1(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", "model-oe", _answers, benchmarks=("vcrbench",),
                       samples={"vcrbench": _open_ended(3)})
    cfg, _ = _recorded(run_dir, {"oe-0": None, "oe-1": None, "oe-2": None})
    capsys.readouterr()
    assert main(["judge", str(run_dir), "--judge-model", cfg.model, "--no-site"]) == 1
    out, err = capsys.readouterr()
    assert "0 judged, 0 judge failure(s), 0 already judged, 3 judged before without a usable verdict" in out
    assert "  3 judge_unparsable: " in err and "    ... 1 more in" in err
    assert f"no item of {run_dir} got a usable verdict (3 waited for one)" in err


def test_a_run_with_nothing_to_judge_says_so(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", "model-mc", lambda s, i: "A", benchmarks=("demo-mc",))
    capsys.readouterr()
    assert main(["judge", str(run_dir), "--judge-model", "tiny-qwen2.5-vl", "--no-site"]) == 0
    out = capsys.readouterr().out
    assert f"nothing to judge: no answer in {run_dir} waits for a judge" in out and "0 judged" not in out


@pytest.mark.vllm
@SERVER_GROUP
def test_judge_pass_through_real_vllm_engine(vllm_server, tmp_path):
    run_dir = make_run(tmp_path / "run", "model-oe", _answers, benchmarks=("vcrbench",),
                       samples={"vcrbench": _open_ended(6)})
    before = json.loads((run_dir / "summary.json").read_text())["benchmarks"]["vcrbench"]
    assert before["n_needs_judge"] == 5 and before["n_failed"] == 1

    cfg = JudgeConfig(model=SERVED, backend="openai", max_tokens=8, concurrency=4,
                      server=ServerSettings(base_url=vllm_server))
    summary = judge_run_dir(run_dir, cfg).to_json()
    jp = summary["judge_pass"]
    assert jp["n_judged"] + jp["n_judge_failed"] == 5 and jp["n_skipped"] == 0  # every item judged or a failure

    files = list((run_dir / "judge").glob("*.jsonl"))
    assert len(files) == 1
    lines = list(read_lines(files[0]).values())  # verdict lines
    assert sorted(x["sample_id"] for x in lines) == ["oe-0", "oe-1", "oe-2", "oe-4", "oe-5"]
    for x in lines:
        assert x["prompt_hash"] == JUDGES["vcrbench"].prompt_hash and x["judge_id"] == jp["judge_id"]
        assert x["protocol"] == "vcrbench" and x["steps"][0]["stage"] == "extract"
        assert x["judge_id"].startswith("tiny-qwen2.5-vl@")
        assert isinstance(x["output"], str)  # what the judge said is kept, parsable or not
        if x["error"]:
            assert x["error"]["kind"] in ("judge_unparsable", "judge_engine_error") and x["score"] is None
        else:
            assert x["verdict"] in ("correct", "incorrect") and x["score"] in (0.0, 1.0)

    after = summary["benchmarks"]["vcrbench"]
    assert after["judge"]["judge_id"] == jp["judge_id"] and after["judge"]["prompt_hash"] == PROMPT_HASH
    assert after["judge"]["n_judged"] == jp["n_judged"]
    assert after.get("n_needs_judge", 0) == jp["n_judge_failed"]  # failures still wait for a judge
    assert after["n_failed"] == 1 and after["n_expected"] == 6
    on_disk = json.loads((run_dir / "summary.json").read_text())["benchmarks"]["vcrbench"]
    assert on_disk["judge"] == after["judge"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["judge"]["prompt_hash"] == PROMPT_HASH and manifest["judge"]["model"] == "tiny-qwen2.5-vl"

    # Resume: the same judge skips everything it judged, without starting an engine.
    t0 = time.monotonic()
    again = judge_run_dir(run_dir, cfg).to_json()
    assert again["judge_pass"]["n_skipped"] == 5 and again["judge_pass"]["n_judged"] == 0
    assert time.monotonic() - t0 < 15
    assert len(read_results(files[0])) == 5 and sum(1 for _ in files[0].open()) == 5  # nothing appended
    assert again["benchmarks"]["vcrbench"]["judge"] == after["judge"]


def test_sigterm_stops_judge_as_ctrl_c_does_even_as_a_background_job(tmp_path):
    # A judge that never answers (a real HTTP server on 127.0.0.1): the pass is in flight when a scheduler's SIGTERM
    # comes, to a `judge` started as a script's background job (SIGINT inherited ignored).
    run_dir = make_run(tmp_path / "run", "model-oe", _answers, benchmarks=("vcrbench",),
                       samples={"vcrbench": _open_ended(2)})
    asked = threading.Event()

    class Silent(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:  # no model listing: the backend skips its served-model check
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            asked.set()
            time.sleep(60)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    httpd.daemon_threads, httpd.block_on_close = True, False
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vbench_async", "judge", str(run_dir), "--judge-model", SERVED, "--backend",
             "openai", "--base-url", f"http://127.0.0.1:{httpd.server_address[1]}/v1", "--no-site"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        try:
            assert asked.wait(120), proc.stderr.read() if proc.poll() is not None else "no judge request"
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert proc.returncode == 130, err  # Ctrl-C's exit, not death by the signal (-15)
    assert "interrupted" in err and "verdicts so far are kept" in err, err
