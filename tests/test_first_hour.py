"""A newcomer's first hour: every message names the next step, and the flags of lmms-eval and VLMEvalKit get a
one-line "did you mean" instead of the whole usage. The `vbench-async` entry point runs in-process, in an empty
folder (no ./data), as a fresh clone has it."""

from __future__ import annotations

import pytest

from vbench_async.cli import build_parser, main


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VBENCH_DATA_ROOT", raising=False)
    return tmp_path


def test_plan_without_data_is_one_line_naming_the_data_root_and_the_next_command(fresh, capsys):
    rc, out, err = _cli(capsys, "plan", "--model", "tiny-qwen3-vl", "--suite", "all")
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 700, err  # not 22 warnings and a 6 KB error
    line = lines[0]
    assert f"none of the 22 benchmark(s) selected has its data under {fresh / 'data'} (that folder does not exist)" \
        in line
    assert "--data-root DIR" in line and "$VBENCH_DATA_ROOT" in line and "./data" in line
    assert line.endswith("vbench-async data check --suite all --data-root DIR")


def test_a_usage_error_leaves_no_run_directory(fresh, capsys):
    rc, _, err = _cli(capsys, "run", "--model", "tiny-qwen2.5-vl", "--suite", "all")
    assert rc == 2 and "has its data" in err
    assert not (fresh / "runs").exists()  # no lock file, no logs of a run that never started


@pytest.mark.parametrize("flag, ours", [
    ("--tasks", "--benchmarks"), ("--limit", "--max-samples"), ("--output_path", "--output-dir"),
    ("--batch_size", "--concurrency"), ("--batch-size", "--concurrency"), ("--model_args", "--model"),
])
def test_other_toolkits_flags_get_one_did_you_mean_line(flag, ours, fresh, capsys):
    rc, out, err = _cli(capsys, "run", "--model", "tiny-qwen2.5-vl", f"{flag}=x")
    assert rc == 2 and out == ""
    assert err.strip() == err.strip().splitlines()[0]  # one line, not the usage
    assert f"unrecognized argument {flag}; did you mean {ours}" in err


def test_vllm_and_project_names_for_one_setting(capsys):
    parser = build_parser("run")
    args = parser.parse_args(["run", "--model", "m", "--kv-cache-memory-bytes", "1073741824"])
    assert args.kv_cache_bytes == 1073741824  # vLLM's flag name
    assert parser.parse_args(["run", "--model", "m", "--kv-cache-bytes", "5"]).kv_cache_bytes == 5  # old scripts
    fetch = build_parser("data").parse_args(["data", "fetch", "mvbench", "--data-root", "/d"])
    assert str(fetch.dest) == "/d"
    assert str(build_parser("data").parse_args(["data", "fetch", "mvbench", "--dest", "/e"]).dest) == "/e"
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--kv-cache-memory-bytes" in text and "--kv-cache-bytes" not in text


def test_serve_help_says_each_default_once(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: $VBENCH_ASYNC_SERVE_TOKEN, else a new secret" in text and "(default: None)" not in text


def test_a_failure_report_names_the_samples_their_files_and_a_real_check_command(tmp_path, capsys):
    from vbench_async.cli.failures import print_failures
    from vbench_async.results.result_file import ResultStore

    store = ResultStore(tmp_path, "demo-mc", "0" * 12)
    with store:
        for i in range(5):
            store.append({"sample_id": f"s{i}", "benchmark": "demo-mc", "config_hash": "0" * 12, "video": f"v{i}.mp4",
                          "output": None, "score": None,
                          "error": {"kind": "decode_error",
                                    "message": f"PyAV cannot open v{i}.mp4: moov atom not found"}})
    summary = {"benchmarks": {"demo-mc": {"n_failed": 5, "results_file": str(store.path.relative_to(tmp_path))}}}
    from vbench_async.benchmarks.selection import Selection

    assert print_failures(tmp_path, summary, selection=Selection(data_root=tmp_path / "my data")) == 5
    err = capsys.readouterr().err
    assert "    demo-mc s0 (v0.mp4): PyAV cannot open v0.mp4: moov atom not found" in err
    assert "    ... 2 more in" in err and "--suite ..." not in err
    assert f"check the data: vbench-async data check demo-mc --data-root '{tmp_path / 'my data'}'" in err


def test_a_read_only_cache_fails_at_once_before_the_plan(tmp_path, capsys):
    from test_reliability_rundir import _tmpfs

    with _tmpfs(tmp_path / "ro", "1m", "ro") as ro:
        rc, out, err = _cli(capsys, "run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "demo-mc", "--max-samples",
                            "2", "--cache-dir", str(ro), "--output-dir", str(tmp_path / "out"))
    assert rc == 2, err
    assert f"cannot write the frame cache {ro}: Read-only file system" in err
    assert "start:" not in out + err and "would grow" not in out + err  # no plan, no disk-budget check first
    assert not (tmp_path / "out").exists()


def test_new_benchmark_suggests_commands_that_work_when_pasted(tmp_path, monkeypatch, capsys):
    import shlex

    from vbench_async.benchmarks import include

    monkeypatch.setattr(include, "_added", [])  # the in-process commands' --include stays with this test

    from support.videos import write_video
    from test_include import records, write_records

    data = tmp_path / "data"
    write_records(data / "my.jsonl", records(2))
    for r in records(2):
        write_video(data / r["path"], frames=8, fps=4, width=96, height=64)
    monkeypatch.chdir(data)
    rc, out, _ = _cli(capsys, "new-benchmark", "my-clips", "--from-records", "my.jsonl", "--data-root", ".",
                      "-o", str(tmp_path / "cards"))
    assert rc == 0
    commands = [line.split("# ")[0].strip().removeprefix("next:").strip() for line in out.splitlines()[1:]]
    validate, check, run = (shlex.split(c) for c in commands)
    assert (validate[2], check[2], run[1]) == ("validate", "check", "run")
    assert _cli(capsys, *validate[1:])[0] == 0
    rc, out, _ = _cli(capsys, *check[1:])  # the card's paths are relative to the data root: the command names it
    assert rc == 0 and "my-clips: 2 records" in out and ": ok" in out
    args = build_parser("run").parse_args(run[1:])
    assert str(args.data_root) == "." and args.model == "tiny-qwen2.5-vl"


def test_server_progress_never_shows_none():
    from vbench_async.cli.serve import job_progress

    assert job_progress({"id": 3, "status": "queued", "progress": {"done": 0, "total": None}}) == \
        "job 3: queued, planning (frames, tokens, engine)"
    assert job_progress({"id": 3, "status": "running", "progress": {"done": 12, "total": 66}}) == \
        "job 3: running, 12/66 samples"
    assert "None" not in job_progress({"id": 4, "status": "running"})


def test_start_up_interruption_and_missing_benchmarks_each_get_one_line(tmp_path, capsys):
    import io
    import json

    from vbench_async.cli.plan_view import print_plan_lines
    from vbench_async.cli.run import kept_line, starting_line

    out = tmp_path / "run"
    assert starting_line(True, out).startswith("starting engine (usually 20-60 s on a CPU")
    assert starting_line(False, out) == ""  # a server is already up
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"run": {"startup_s": 31.6},
                                                  "benchmarks": {"a": {"n_total": 40}, "b": {"n_total": 26}}}))
    assert starting_line(True, out).startswith("starting engine (about 32 s, as last time)")
    assert kept_line(out) == f"66 result(s) kept in {out / 'results'}; re-run the same command to resume"
    buf = io.StringIO()
    print_plan_lines(None, {f"b{i}": "no annotations" for i in range(21)}, file=buf)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("not run (no data): 21 of 21 benchmarks (b0, b1") and \
        "data check" in lines[0]


def test_a_sweep_budget_that_changes_nothing_is_warned_about(tmp_path):
    import json

    from test_leaderboard_runs import make_run, right

    from vbench_async.benchmarks import get_benchmark
    from vbench_async.cli.next_step import budget_warnings
    from vbench_async.frames.cache import FrameCache
    from vbench_async.samples import Sample

    mc = [s for s in get_benchmark("demo-mc").load_samples(None) if isinstance(s, Sample)][:2]
    summaries = []
    with FrameCache(tmp_path / "cache", workers=1) as cache:
        for budget in (2, 64, 128):  # the demo's few-second videos at 2 fps: 64 and 128 both take every sample step
            run = make_run(tmp_path / f"b{budget}", "m", right, benchmarks=("demo-mc",), samples={"demo-mc": mc},
                           cache=cache, frame_overrides={"max_frames": budget})
            summaries.append({**json.loads((run / "summary.json").read_text()), "run_dir": str(run)})
    warnings = budget_warnings([2, 64, 128], summaries)
    assert len(warnings) == 1 and warnings[0].startswith("max_frames=128: 2 of 2 sample(s) got the same frames as "
                                                         "max_frames=64"), warnings


def test_a_hub_id_while_the_hub_is_off_names_hf_hub_offline(fresh, capsys):
    from vbench_async.families import hub_offline

    if not hub_offline():
        pytest.skip("the hub is on in this session (HF_HUB_OFFLINE unset): a hub id would be downloaded")
    rc, out, err = _cli(capsys, "run", "--model", "vbench-async-tests/no-such-model", "--benchmarks", "demo-mc")
    assert rc == 2 and out == ""
    assert "'vbench-async-tests/no-such-model': it is not in the local Hugging Face cache, and HF_HUB_OFFLINE=1" in err
    assert "HF_HUB_OFFLINE=0 vbench-async" in err and "unset HF_HUB_OFFLINE" in err and "--model /path/to/model" in err
    assert "couldn't connect" not in err


@pytest.mark.parametrize("command", [("run",), ("plan",), ("cache", "stats")])
def test_cache_dir_help_names_every_variable_that_moves_the_cache(command, capsys, tmp_path, monkeypatch):
    from vbench_async.frames import default_cache_dir

    monkeypatch.setenv("COLUMNS", "400")  # no line wrapped inside a path
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "frame cache (default: $VBENCH_ASYNC_CACHE, else $VBENCH_ASYNC_HOME/frames, else " \
           "~/.cache/vbench-async/frames)" in text
    monkeypatch.delenv("VBENCH_ASYNC_CACHE", raising=False)
    monkeypatch.setenv("VBENCH_ASYNC_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "frames"  # what the help says is where the cache goes
