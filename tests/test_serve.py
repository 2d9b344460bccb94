"""The evaluation server: jobs are checked before they queue, the HTTP layer keeps to loopback or a token, and a
running `vbench-async serve` process takes two jobs (one from `run --server`, one posted as JSON over HTTP) and writes
two complete run directories, each with its site (written by the server, once), and cancels a third mid-run keeping a
partial summary. The default tests send the jobs' requests to the shared vLLM server (no engine of their own); the
slow test keeps an in-process engine across jobs and swaps it for another model."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, SERVED, SERVER_GROUP, run_cli, stop, wait_for_site
from test_cli_console import ENGINE_MARKERS
from test_include import included_run_args, my_clips  # noqa: F401 - the session's clips, their frames cached
from test_run_settings import includes, open_card  # noqa: F401 - a card whose samples fail without an engine
from test_security_server import allowed

from vbench_async.backends.openai import ServerSettings
from vbench_async.backends.sampling_overrides import SamplingOverrides
from vbench_async.cli import main as cli_main
from vbench_async.cli.serve import eval_server
from vbench_async.errors import UserError
from vbench_async.evaluation.run_config import run_sampling
from vbench_async.evaluation.runner import RunConfig
from vbench_async.frames.frame_settings import FrameSettings
from vbench_async.serve import client
from vbench_async.serve.api import check_binding, make_http_server
from vbench_async.serve.jobs import JobSpec
from vbench_async.serve.server import EvalServer

TOKEN = "s3cret-token"


@pytest.mark.parametrize("body,message", [
    ({}, "say what to evaluate"),
    ({"selection": {"suite": "demo"}, "colour": "red"}, r"unknown field\(s\) colour"),
    ({"selection": {"suite": "demo", "max_samples": 0}}, "selection.max_samples must be at least 1"),
    ({"selection": {"suite": "demo"}, "concurrency": "lots"}, "concurrency must be int"),
    ({"selection": {"suite": "demo"}, "mode": "preprocess"}, "mode must be auto, eval or both"),
    ({"selection": {"suite": "demo"}, "sampling": {"max_tokenz": 5}}, r"unknown field\(s\) sampling.max_tokenz"),
    ({"selection": {"suite": "demo"}, "frame_overrides": {"max_frames": "8"}},
     "frame_overrides.max_frames must be int"),
    ({"selection": {"suite": "demo"}, "engine": {"max_num_seqs": 2}}, r"job field\(s\) engine are the server's own"),
    ({"selection": {"suite": "demo"}, "cache_dir": "/tmp/c"}, r"job field\(s\) cache_dir are the server's own"),
    ({"selection": {"benchmarks": [1, 2]}}, r"selection.benchmarks\[0\] must be str"),
    ([1], "a job is a JSON object"),
])
def test_a_bad_job_is_refused_before_it_queues(body, message) -> None:
    with pytest.raises(UserError, match=message):
        JobSpec.from_json(body)


def test_a_job_becomes_the_run_config_of_its_fields() -> None:
    spec = JobSpec.from_json({"selection": {"benchmarks": ["demo-mc", "demo-tg"]}, "frame_overrides": {"max_frames": 8},
                              "sampling": {"max_tokens": 7}, "output_dir": "/tmp/x", "concurrency": 3})
    base = RunConfig(model="tiny-qwen2.5-vl", backend="openai", concurrency=16)
    cfg = spec.run_config(base)
    assert cfg.selection.benchmarks == ("demo-mc", "demo-tg") and cfg.frame_overrides == FrameSettings(max_frames=8)
    assert cfg.sampling == SamplingOverrides(max_tokens=7) and cfg.concurrency == 3 and cfg.backend == "openai"
    assert run_sampling(cfg).top_p == 1.0  # a nested field the job leaves out keeps its value (unset: the default)
    assert cfg.model == "tiny-qwen2.5-vl" and str(cfg.output_dir) == "/tmp/x" and not cfg.progress
    assert JobSpec.from_json(spec.to_json()) == spec  # what GET /jobs/ID shows is a job again
    assert JobSpec.from_json({"selection": {"suite": "demo"}}).run_config(base).concurrency == 16  # the server's


def test_beyond_loopback_a_token_is_required() -> None:
    check_binding("127.0.0.1", None)
    check_binding("::1", None)
    with pytest.raises(UserError, match="refusing to serve on 0.0.0.0 without a token"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", TOKEN)


@pytest.fixture
def http_server():
    """An in-process server (no job here reaches an engine), with a token; yields its URL."""
    evals = EvalServer(RunConfig(model="tiny-qwen2.5-vl", backend="openai"))
    httpd = make_http_server(evals, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    evals.close()


def test_the_http_layer_checks_the_token_and_reports_errors(http_server) -> None:
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(http_server + "/health", timeout=5)
    assert denied.value.code == 401
    assert client.health(http_server, TOKEN)["ok"]
    with pytest.raises(UserError, match=r"HTTP 400: unknown field\(s\) colour"):
        client.submit(http_server, {"selection": {"suite": "demo"}, "colour": 1}, TOKEN)
    with pytest.raises(UserError, match="HTTP 404: no job 'nope'"):
        client.status(http_server, "nope", TOKEN)
    job = client.submit(http_server, {"selection": {"benchmarks": ["no-such-bench"]}}, TOKEN)
    done = client.wait(http_server, job["id"], TOKEN, poll_s=0.05)
    assert done["status"] == "failed" and "unknown benchmark 'no-such-bench'" in done["error"]
    with pytest.raises(UserError, match="cannot reach the evaluation server"):
        client.health("http://127.0.0.1:9", TOKEN)


def test_a_job_posted_over_http_gets_its_site_from_the_server_and_run_server_writes_none(tmp_path,
                                                                                         includes) -> None:  # noqa: F811
    """`serve`'s worker (cli/serve.py's, with its site hook) behind a real HTTP server on 127.0.0.1: a job posted as
    JSON, as curl posts it, ends with its own site; `run --server` prints the server's and writes none itself;
    `run --server --no-site` gets none from the server either. The jobs are of a card whose videos are gone: every
    sample fails at once, no engine starts."""
    cards, data = open_card(tmp_path)
    evals = eval_server(RunConfig(model="tiny-qwen2.5-vl", backend="openai",
                                  server=ServerSettings(base_url="http://127.0.0.1:9/v1")), allowed(tmp_path))
    httpd = make_http_server(evals, "127.0.0.1", 0, None)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    job = {"selection": {"benchmarks": ["my-open"], "include": [str(cards)], "data_root": str(data)},
           "output_dir": str(tmp_path / "posted")}
    try:
        posted = urllib.request.Request(f"{url}/jobs", data=json.dumps(job).encode(), method="POST",
                                        headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(posted, timeout=30) as answer:
            record = client.wait(url, json.loads(answer.read())["job"]["id"], poll_s=0.05)
        assert record["status"] == "done" and record["site"] == str(tmp_path / "posted" / "leaderboard" /
                                                                    "index.html"), record
        argv = ["run", "--server", url, "--model", "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks",
                "my-open", "--data-root", str(data), "--no-progress"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli_main([*argv, "--output-dir", str(tmp_path / "client")])
        assert cli_main([*argv, "--output-dir", str(tmp_path / "quiet"), "--no-site"]) == 1
        quiet = [j for j in evals.jobs() if j.run_dir == str(tmp_path / "quiet")]
    finally:
        httpd.shutdown()
        httpd.server_close()
        evals.close()
    assert code == 1  # its samples failed: recorded, the job itself done
    assert wait_for_site(tmp_path / "posted").is_file()
    assert wait_for_site(tmp_path / "client").is_file()  # the server's writer: its log says it is done
    shown = [line for line in out.getvalue().splitlines() if line.startswith("leaderboard:")]
    assert len(shown) == 1 and "by the server" in shown[0], out.getvalue()
    # --no-site travels with the job (RunConfig.site): the server starts no site for it.
    assert len(quiet) == 1 and quiet[0].status == "done" and quiet[0].site is None, [j.to_json() for j in quiet]
    assert (tmp_path / "quiet" / "summary.json").is_file()
    assert not (tmp_path / "quiet" / "logs" / "site.log").exists() and not (tmp_path / "quiet" / "leaderboard").exists()


def test_sites_wait_while_jobs_follow_each_other_and_are_written_once_the_queue_is_idle(tmp_path,
                                                                                      includes) -> None:  # noqa: F811
    """Three jobs queued back to back (their samples fail at once: videos gone, no engine): no site is started while a
    job waits or runs, each job's record names its index.html as it ends, and once the queue has been idle for
    SITE_GRACE_S every site is started, once each, and written (the real background writer, through its log)."""
    from vbench_async.cli.output import write_run_site_in_background
    from vbench_async.serve.server import SITE_GRACE_S

    cards, data = open_card(tmp_path)
    started: list[tuple[Path, dict, float]] = []

    def write_site(run_dir: Path) -> Path:
        started.append((run_dir, dict(evals.health()["jobs"]), time.monotonic()))
        return write_run_site_in_background(run_dir)

    evals = EvalServer(RunConfig(model="tiny-qwen2.5-vl", backend="openai",
                                 server=ServerSettings(base_url="http://127.0.0.1:9/v1")), write_site=write_site,
                       paths=allowed(tmp_path))
    outs = [tmp_path / f"job{i}" for i in range(3)]
    try:
        jobs = [evals.submit(JobSpec.from_json({"selection": {"benchmarks": ["my-open"], "include": [str(cards)],
                                                              "data_root": str(data)}, "output_dir": str(out)}))
                for out in outs]
        _until(lambda: all(j.finished for j in jobs), 120)
        ended = max(j.finished_at or 0 for j in jobs)
        assert [j.status for j in jobs] == ["done"] * 3, [j.to_json() for j in jobs]
        assert [j.site for j in jobs] == [str(out / "leaderboard" / "index.html") for out in outs]
        _until(lambda: len(started) == 3, 60)
    finally:
        evals.close()
    assert [run_dir for run_dir, _, _ in started] == outs
    assert all(jobs_then == {"queued": 0, "running": 0} for _, jobs_then, _ in started), started
    first_start = min(t for _, _, t in started) - time.monotonic() + time.time()  # on the jobs' clock
    assert first_start >= ended + SITE_GRACE_S - 0.1, (first_start, ended)
    assert evals.health()["sites_waiting"] == 0
    for out in outs:
        assert wait_for_site(out).is_file()


def _until(ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"not so after {timeout} s"
        time.sleep(0.05)


# -- a real `serve` process -------------------------------------------------------------------------------------------


def start_serve(*args: str, token: str | None = None, console: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`vbench-async serve ARGS --port 0`; returns the process and its URL (from its first line). `console`: a file
    for its stderr (its stdout stays the pipe: `served_console` reads the rest)."""
    env = {**os.environ, **({"VBENCH_ASYNC_SERVE_TOKEN": token} if token else {})}
    err = console.open("w") if console is not None else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "vbench_async", "serve", "--port", "0", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    line = proc.stdout.readline()
    match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
    if not match:
        stop(proc, 10)
        pytest.fail(f"serve did not start: {line!r}")
    return proc, match.group(1)


def wait_status(url: str, job_id: str, wanted: set[str], token: str | None, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.status(url, job_id, token)
        if job["status"] in wanted:
            return job
        time.sleep(0.05)
    pytest.fail(f"job {job_id} never reached {wanted}: {job}")


def assert_complete(run_dir: Path, benchmark: str, n: int) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    block = summary["benchmarks"][benchmark]
    assert summary["complete"] and block["n_total"] == n and block["n_failed"] == 0, block
    lines = [json.loads(x) for f in (run_dir / "results").glob(f"{benchmark}.*.jsonl")
             for x in f.read_text().split("\n") if x]
    assert len({r["sample_id"] for r in lines}) == n
    assert (run_dir / "manifest.json").is_file()


@pytest.mark.vllm
@SERVER_GROUP
def test_two_jobs_give_two_complete_run_directories_and_others_are_cancelled(vllm_server, my_clips,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    data, recs, cache = my_clips  # the frames are cached by the include test when it ran first in this session
    cards = tmp_path / "cards"
    assert cli_main(["new-benchmark", "my-clips", "--from-records", str(recs), "--data-root", str(data), "-o",
                     str(cards)]) == 0
    console = tmp_path / "serve-console.txt"
    proc, url = start_serve("--model", SERVED, "--backend", "openai", "--base-url", vllm_server, "--served-model",
                            SERVED, "--cache-dir", str(cache), "--workers", "1", "--log-dir", str(tmp_path / "serve"),
                            "--output-root", str(tmp_path), "--data-root", str(data), "--include", str(cards),
                            token=TOKEN, console=console)
    try:
        # One job from `run --server` (its --include travels with the job), one from the client library.
        # (the frame cache and decoder workers are the server's: a job that sets them is refused; --no-site would
        # reach the server, and this job's site is one the test wants)
        job_args = [a for a in included_run_args(cards, data, cache) if a not in ("--cache-dir", str(cache),
                                                                                  "--workers", "1", "--no-site")]
        first = run_cli("run", "--server", url, "--model", SERVED, *job_args,
                        "--output-dir", str(tmp_path / "one"), env={"VBENCH_ASYNC_SERVE_TOKEN": TOKEN})
        assert first.returncode == 0, first.stderr[-3000:]
        assert [m for m in ENGINE_MARKERS if m in first.stdout + first.stderr] == []  # `run`'s quiet console
        assert (tmp_path / "one" / "logs" / "engine.log").is_file()  # the job's log in its run directory
        assert re.search(r"my-clips\s.*\s4\s+0\s+complete", first.stdout), first.stdout
        body = {"selection": {"benchmarks": ["my-clips"], "include": [str(cards)], "data_root": str(data)},
                "sampling": {"max_tokens": 8}, "output_dir": str(tmp_path / "two")}
        posted = urllib.request.Request(f"{url}/jobs", data=json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})  # as curl posts it
        with urllib.request.urlopen(posted, timeout=30) as answer:
            job = json.loads(answer.read())["job"]
        second = client.wait(url, job["id"], TOKEN, poll_s=0.1)
        assert second["status"] == "done" and second["progress"] == {"done": 4, "total": 4}, second
        assert second["site"] == str(tmp_path / "two" / "leaderboard" / "index.html")  # the server writes it
        assert_complete(tmp_path / "one", "my-clips", 4)
        assert_complete(tmp_path / "two", "my-clips", 4)

        # A running job (cancelled while it plans 66 questions) and one queued behind it.
        demo = {"selection": {"suite": "demo"}, "mode": "eval", "sampling": {"max_tokens": 8}}
        running = client.submit(url, {**demo, "output_dir": str(tmp_path / "three")}, TOKEN)
        queued = client.submit(url, {**demo, "output_dir": str(tmp_path / "four")}, TOKEN)
        wait_status(url, running["id"], {"running"}, TOKEN)
        assert client.cancel(url, queued["id"], TOKEN)["status"] == "cancelled"  # it never starts
        client.cancel(url, running["id"], TOKEN)
        cancelled = wait_status(url, running["id"], {"done", "failed", "cancelled"}, TOKEN)
        assert cancelled["status"] == "cancelled", cancelled
        assert json.loads((tmp_path / "three" / "summary.json").read_text())["complete"] is False
        assert not (tmp_path / "four").exists()
        assert client.health(url, TOKEN)["jobs"] == {"queued": 0, "running": 0}

        # Both finished jobs have their own site, written once, by the server: `run --server` writes none of its own.
        assert wait_for_site(tmp_path / "two").is_file()
        assert wait_for_site(tmp_path / "one").is_file()
        shown = [line for line in first.stdout.splitlines() if line.startswith("leaderboard:")]
        assert len(shown) == 1 and "by the server" in shown[0], first.stdout
    finally:
        stop(proc, 60)
    assert proc.returncode == 0
    served = console.read_text() + proc.stdout.read()
    assert [m for m in ENGINE_MARKERS if m in served] == [], served[-3000:]


@pytest.mark.slow
@pytest.mark.vllm
@SERVER_GROUP
def test_the_server_keeps_its_engine_across_jobs_and_swaps_it_for_another_model(tmp_path: Path) -> None:
    console = tmp_path / "serve-console.txt"
    proc, url = start_serve("--model", "tiny-qwen2.5-vl", "--cache-dir", str(tmp_path / "cache"), "--workers", "1",
                            "--log-dir", str(tmp_path / "serve"), "--output-root", str(tmp_path), console=console)
    try:
        for name in ("one", "two"):
            job = client.submit(url, {"selection": {"benchmarks": ["demo-mc"]}, "sampling": {"max_tokens": 8},
                                      "output_dir": str(tmp_path / name)})
            done = client.wait(url, job["id"], poll_s=0.2)
            assert done["status"] == "done", done
            assert_complete(tmp_path / name, "demo-mc", 11)
        assert client.health(url)["engine_starts"] == 1  # the second job paid no engine start-up
        job = client.submit(url, {"model": "tiny-qwen2-vl", "selection": {"benchmarks": ["demo-mc"]},
                                  "sampling": {"max_tokens": 8},
                                  "output_dir": str(tmp_path / "other")})
        assert client.wait(url, job["id"], poll_s=0.2)["status"] == "done"
        assert_complete(tmp_path / "other", "demo-mc", 11)
        health = client.health(url)
        assert health["engine_starts"] == 2 and "tiny-qwen2-vl" in health["kept"]["model"]
    finally:
        stop(proc, 60)
    served = console.read_text() + proc.stdout.read()
    assert [m for m in ENGINE_MARKERS if m in served] == [], served[-3000:]  # the engine's output: serve's log
    assert re.search(r"EngineCore pid=\d+ INFO vllm\.", (tmp_path / "serve" / "logs" / "engine.log").read_text())
