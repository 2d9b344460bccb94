"""What a new user meets at the console: a quiet `run` (engine logs in OUTPUT_DIR/logs/engine.log), and mistakes
caught before any engine starts, each with one clear line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DEMO_ARGS, ENGINE_GROUP, SERVED, SERVER_GROUP, run_cli

from vbench_async import cli
from vbench_async.cli.failures import print_failures
from vbench_async.errors import UserError
from vbench_async.failure_kinds import FailureKind
from vbench_async.sharding import Shard

# What vLLM, torch and multiprocessing print when nothing redirects them (seen on the console before this change).
ENGINE_MARKERS = ("EngineCore", "MainProcess pid=", " vllm.", "[shutdown]", "Triton", "NUMA binding",
                  "Loading safetensors", "libtcmalloc", "resource_tracker", "leaked semaphore", "FutureWarning")


@ENGINE_GROUP
@pytest.mark.vllm
def test_the_demo_run_prints_only_its_own_lines_and_the_engine_log_holds_vllms(qwen25_runs):
    """`make demo`'s command (the demo suite on tiny Qwen2.5-VL, in-process vLLM): the console has the start-up line
    and the table and nothing of vLLM's; engine.log has vLLM's records from this process and from the engine-core
    process, and the engine core's raw output (its weight-loading bar)."""
    tmp, first, _ = qwen25_runs
    assert first.returncode == 0, first.stderr[-3000:]
    console = first.stdout + first.stderr
    assert [m for m in ENGINE_MARKERS if m in console] == [], console[-3000:]
    assert console.count("start: engine vllm, model tiny-qwen2.5-vl, 66 sample(s) in 6 benchmark(s)") == 1
    assert re.search(r"demo-mc\s.*\s11\s+0\s+complete", first.stdout), first.stdout
    log = (tmp / "a" / "logs" / "engine.log").read_text()
    assert re.search(r"MainProcess pid=\d+ INFO vllm\.", log) and re.search(r"EngineCore pid=\d+ INFO vllm\.", log)
    assert "Loading safetensors checkpoint shards" in log


@pytest.mark.parametrize("option", ["--concurrency 0", "--concurrency -1", "--loaders 0", "--max-tokens 0",
                                    "--temperature -1", "--workers -3", "--max-samples 0", "--top-p 0",
                                    "--max-frames 0"])
def test_numeric_options_out_of_range_are_refused_when_parsed(option, capsys):
    flag, value = option.split()
    with pytest.raises(SystemExit) as stop:
        cli.build_parser("run").parse_args(["run", "--model", "m", "--suite", "demo", flag, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be " in err and f"not {value}" in err, err


def test_help_texts_say_each_default_once_and_no_doubled_percent():
    commands = ["run", "plan", "merge", "preprocess", "cache", "list", "data", "judge", "leaderboard", "compare",
                "train"]
    for name in commands:
        parser = cli.build_parser(name)
        sub = next(a for a in parser._actions if a.dest == "command").choices[name]
        text = sub.format_help()
        assert "%%" not in text and "(default: None)" not in text, name
        formatter = sub._get_formatter()
        for action in sub._actions:
            if action.help:
                assert formatter._expand_help(action).count("(default:") <= 1, (name, action.option_strings)


def _failed_run(run_dir: Path, kinds: dict[str, int]) -> dict:
    """A run directory whose result file holds failures of the given kinds (written by the real result store)."""
    from vbench_async.results.result_file import ResultStore

    store = ResultStore(run_dir, "demo-mc", "0" * 12)
    with store:
        i = 0
        for kind, n in kinds.items():
            for _ in range(n):
                store.append({"sample_id": f"s{i}", "benchmark": "demo-mc", "config_hash": "0" * 12,
                              "output": None, "score": None, "error": {"kind": kind, "message": "x"}})
                i += 1
    rel = store.path.relative_to(run_dir)
    return {"benchmarks": {"demo-mc": {"n_failed": i, "results_file": str(rel)}}}


def test_the_failures_are_named_by_kind_with_a_fix(tmp_path, capsys):
    summary = _failed_run(tmp_path, {"video_missing": 3, "context_overflow": 1})
    assert print_failures(tmp_path, summary) == 4
    err = capsys.readouterr().err
    assert "4 sample(s) failed:" in err
    assert f"3 video_missing: {FailureKind.VIDEO_MISSING.hint}" in err and "--max-frames" in err, err


def test_an_output_directory_of_another_model_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"model": {"name": "other-model", "path": "/models/other"}}))
    (out / "summary.json").write_text(json.dumps({"model": "other-model", "benchmarks": {}}))
    code = cli.main(["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "holds the results of other-model" in err and "--output-dir" in err, err
    assert json.loads((out / "summary.json").read_text())["model"] == "other-model"


def test_data_map_mistakes_are_errors_for_run_and_list(tmp_path):
    broken = tmp_path / "map.yaml"
    broken.write_text("benchmarks:\n  videome: {video_dir: /videos}\n")
    for argv in (["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--data-root", str(broken),
                  "--output-dir", str(tmp_path / "o")], ["list", "--data-root", str(broken)]):
        with pytest.raises(UserError, match=r"unknown benchmark 'videome' \(did you mean 'videomme'\?\)"):
            _parse_and_call(argv)
    with pytest.raises(UserError, match="does not exist"):
        _parse_and_call(["list", "--data-root", str(tmp_path / "missing.yaml")])
    with pytest.raises(UserError, match=r"did you mean 'videomme'"):
        from vbench_async.benchmarks import get_benchmark

        get_benchmark("videome")


def _parse_and_call(argv: list[str]) -> int:
    args = cli.build_parser(argv[0]).parse_args(argv)
    return args.func(args)


def test_a_one_based_shard_says_how_to_count():
    with pytest.raises(UserError, match=r"count from 0 .*--shard auto.*SLURM_ARRAY_TASK_ID-1"):
        Shard.parse("4/4")


def test_read_only_destinations_give_one_line(tmp_path, capsys):
    """A read-only --output-dir or `leaderboard -o`: one line, no traceback, before any engine (a read-only
    --cache-dir: test_reliability_rundir.py)."""
    from test_reliability_rundir import _tmpfs

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"model": "m", "complete": True, "benchmarks": {}}))
    with _tmpfs(tmp_path / "ro", "1m", "ro") as ro:
        codes = [cli.main(["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--output-dir",
                           str(ro / "out")]), cli.main(["leaderboard", str(run_dir), "-o", str(ro / "site")])]
    assert codes == [2, 2]
    assert capsys.readouterr().err.splitlines() == [
        f"vbench-async: error: cannot write the run directory {ro / 'out'}: Read-only file system; choose a "
        "writable --output-dir",
        f"vbench-async: error: cannot write the site to {ro / 'site'}: Read-only file system; choose a writable -o "
        "folder"]


@pytest.mark.slow
def test_preprocess_mode_reports_the_cache_and_a_named_run_is_labelled(tmp_path):
    """`--mode preprocess` fills the cache and says so (exit 0, no PARTIAL table); `--name` labels the run."""
    out = tmp_path / "out"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-samples", "2",
                   "--mode", "preprocess", "--name", "my-label", "--output-dir", str(out),
                   "--cache-dir", str(tmp_path / "cache"), *DEMO_ARGS[2:], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"preprocess -> {tmp_path / 'cache'}: 2 jobs" in proc.stdout and "PARTIAL" not in proc.stdout, proc.stdout
    assert json.loads((out / "summary.json").read_text())["model"] == "my-label"


def test_preprocess_mode_output_names_the_cache(tmp_path, capsys):
    """The default suite's cheap equivalent of the slow test above: the report `run --mode preprocess` prints."""
    from vbench_async.cli.run import _print_preprocessed
    from vbench_async.evaluation.runner import RunConfig

    summary = {"run": {"preprocess": {"jobs": 3, "unique": 2, "cached": 2, "reused": 0, "deferred": 0, "failed": 0,
                                      "seconds": 1.5, "failures": []}}}
    assert _print_preprocessed(summary, RunConfig(model="m", cache_dir=tmp_path)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"preprocess -> {tmp_path}: 3 jobs, 2 unique videos: 2 cached") and "PARTIAL" not in out


@pytest.mark.slow
@SERVER_GROUP
@pytest.mark.vllm
def test_a_served_model_the_server_does_not_have_stops_before_the_run(vllm_server, tmp_path, capsys):
    """The real vLLM server's /v1/models is read before the first request: a wrong --served-model is one line (exit
    2), not an HTTP 404 recorded against every sample. In-process: the run's imports are the test process's."""
    out = tmp_path / "out"
    code = cli.main(["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-samples", "2",
                     "--backend", "openai", "--base-url", vllm_server, "--served-model", "not-served",
                     "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache"), *DEMO_ARGS[2:]])
    err = capsys.readouterr().err
    assert code == 2 and f"serves '{SERVED}', not 'not-served': pass --served-model {SERVED}" in err, err
    assert [f.read_text() for f in (out / "results").glob("*.jsonl")] in ([], [""]), "samples were recorded"


def test_the_openai_backend_reads_the_model_list_before_the_first_request():
    """The default suite's equivalent of the slow test above: an HTTP server on 127.0.0.1 that lists its models the
    way vLLM's does (GET /v1/models); a name it does not list fails start(), one it lists starts."""
    import asyncio
    import http.server
    import threading

    from vbench_async.backends.openai import OpenAIBackend

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            body = json.dumps({"object": "list", "data": [{"id": "served-a", "object": "model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"

    async def start(name: str) -> None:
        backend = OpenAIBackend(model=name, base_url=url)
        await backend.start()
        await backend.close()

    try:
        with pytest.raises(UserError, match=r"serves 'served-a', not 'missing': pass --served-model served-a"):
            asyncio.run(start("missing"))
        asyncio.run(start("served-a"))
    finally:
        server.shutdown()


# -- the same console for every pass: sweeps, `serve`, `judge`, `run --server` -----------------------------------------


def test_each_budget_of_a_sweep_writes_its_own_engine_log(tmp_path, capsys):
    """A frame-budget sweep's passes each run under `run`'s console: each budget's run logs into its own
    logs/engine.log (samples whose videos are gone: no engine, so the default suite checks the wiring in seconds; the
    slow test below runs real engines and reads the console)."""
    from test_run_settings import open_card

    from vbench_async.benchmarks import include

    saved = list(include._added)
    cards, data = open_card(tmp_path)
    out = tmp_path / "sweep"
    try:
        code = cli.main(["run", "--model", "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks", "my-open",
                         "--data-root", str(data), "--max-frames", "4,8", "--output-dir", str(out), "--no-site",
                         "--no-progress", "--mode", "eval", "--backend", "openai", "--base-url",
                         "http://127.0.0.1:9/v1"])
    finally:
        include._added[:] = saved
    console = capsys.readouterr()
    assert code == 1, console.err[-3000:]  # the samples' videos are gone: recorded failures
    for budget in (4, 8):
        assert (out / f"max_frames-{budget}" / "logs" / "engine.log").is_file(), budget
    # One start line for the sweep (its largest budget runs first), then a line for the other budget.
    assert console.out.count("start: ") == 1 and "then max_frames=4: 2 sample(s) in 1 benchmark(s)" in console.out


@pytest.mark.slow  # two in-process engine starts
@ENGINE_GROUP
@pytest.mark.vllm
def test_a_sweep_prints_no_engine_line_and_each_budget_has_the_engines_log(tmp_path):
    out = tmp_path / "sweep"
    proc = run_cli("run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-samples", "2",
                   "--max-tokens", "4", "--max-frames", "4,8", "--no-progress", "--no-site", "--workers", "1",
                   "--output-dir", str(out), "--cache-dir", str(tmp_path / "cache"), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    assert [m for m in ENGINE_MARKERS + (" INFO ",) if m in console] == [], console[-3000:]
    # One engine for both budgets (the largest first): one start line, then the other budget's line.
    assert console.count("start: ") == 1 and console.count("start: engine vllm, model tiny-qwen2.5-vl") == 1, console
    assert "then max_frames=4: 2 sample(s) in 1 benchmark(s), on the same engine" in console, console
    first = (out / "max_frames-8" / "logs" / "engine.log").read_text()
    assert re.search(r"EngineCore pid=\d+ INFO vllm\.", first)  # the engine's start-up, in the run that started it
    # The run on the kept engine: its own vLLM records (the engine is closed after it) and where the start-up is.
    then = (out / "max_frames-4" / "logs" / "engine.log").read_text()
    assert f"the engine is the one started by the run in {out / 'max_frames-8'}" in then, then
    assert re.search(r"MainProcess pid=\d+ INFO vllm\..*\[shutdown\]", then), then


@pytest.mark.slow  # an in-process judge engine
@ENGINE_GROUP
@pytest.mark.vllm
def test_judge_prints_no_engine_line_and_logs_the_engine_in_the_run(tmp_path):
    from test_judge import _answers, _open_ended
    from test_leaderboard_runs import make_run

    run_dir = make_run(tmp_path / "run", "model-oe", _answers, benchmarks=("vcrbench",),
                       samples={"vcrbench": _open_ended(3)})
    proc = run_cli("judge", str(run_dir), "--judge-model", "tiny-qwen2.5-vl", "--max-tokens", "4", "--no-site",
                   timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    assert [m for m in ENGINE_MARKERS if m in console] == [], console[-3000:]
    assert re.search(r"EngineCore pid=\d+ INFO vllm\.", (run_dir / "logs" / "engine.log").read_text())
