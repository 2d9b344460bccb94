"""One declaration of a run: every setting of RunConfig (its own fields and its nested settings) reaches the runner's
config with the same value from each entry point: the `run` command line, a server job (`run --server`'s JSON,
checked and merged by the server), the JSON form (`RunConfig.to_json`/`from_json`) and a training config's
`validation.run`, which every rank's validation runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from vbench_async import cli, settings
from vbench_async.benchmarks import include
from vbench_async.cli.run_options import config_from_args
from vbench_async.cli.serve import base_config, job_from_run_args
from vbench_async.errors import UserError
from vbench_async.evaluation.runner import RunConfig
from vbench_async.serve.jobs import JobSpec, server_owned

# Engine settings the runner sets itself (from the plan and the sampling seed), not a user's: no flag, JSON only.
RUNNER_SET = {("engine", n) for n in ("enable_prefix_caching", "mm_processor_cache_gb", "max_images", "max_videos",
                                      "seed", "profile_frames", "profile_pixels", "profile_height", "profile_width",
                                      "min_kv_cache_bytes")}
# Settings whose command-line form is not a field's generated flag: --include (cli/include.py, light for --help),
# --max-frames (a budget list: a sweep), --shard K/N|auto (resolved by the launcher, then passed in).
SPECIAL = {("selection", "include"), ("frame_overrides", "max_frames"), ("shard",)}


def other_value(path: tuple[str, ...], f: dataclasses.Field, hint: Any, where: Path) -> Any:
    """A valid value of the field other than its default."""
    meta = f.metadata
    default = f.default if f.default is not dataclasses.MISSING else None
    text = hint.__name__ if isinstance(hint, type) else str(hint)
    if "choices" in meta:
        return next(c for c in reversed(meta["choices"]) if c != default and c not in ("preprocess", "openai"))
    if path == ("selection", "include"):
        return (where,)
    if path == ("shard",):
        return (1, 3)
    if text.startswith("bool"):
        return not default
    if "Path" in text:
        return where / "-".join(path)
    if "tuple[str" in text:
        return ("a-" + path[-1], "b")
    if text.startswith("int") or text == "int | None":
        low = meta.get("min", 0)
        return max(low, (default or 0) + 3)
    if "float" in text:
        if meta.get("max") == 1 or path[-1] == "gpu_memory_utilization":
            return 0.5
        return float((default or 0) + 2.5)
    if "str" in text:
        return f"x-{path[-1]}"
    raise AssertionError(f"no test value for {path}: {hint}")


def all_settings(where: Path) -> list[tuple[tuple[str, ...], Any]]:
    return [(path, other_value(path, f, hint, where)) for path, f, hint in settings.leaves(RunConfig)]


def value_at(cfg: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        cfg = cfg[name] if isinstance(cfg, dict) else getattr(cfg, name)
    return cfg


def argv_of(path: tuple[str, ...], value: Any) -> list[str]:
    """The `run` flag(s) that set `path` to `value`."""
    if path == ("selection", "include"):
        return ["--include", str(value[0])]
    if path == ("frame_overrides", "max_frames"):
        return ["--max-frames", str(value)]
    field = next(f for p, f, _ in settings.leaves(RunConfig) if p == path)
    flag = field.metadata.get("flag", "--" + path[-1].replace("_", "-"))
    if isinstance(value, bool):
        return [flag]
    if isinstance(value, tuple):
        return [flag, ",".join(value)]
    return [flag, str(value)]


@pytest.fixture
def includes():
    saved = list(include._added)
    yield
    include._added[:] = saved


def parse_run(argv: list[str]):
    args = cli.build_parser("run").parse_args(["run", *argv])
    cli.apply_include(args)
    return args


def test_every_setting_is_a_declared_field_with_a_command_line_form() -> None:
    """Each scalar setting under RunConfig is a flag generated from its field (help in its metadata), one of the
    three documented special forms, or an engine setting the runner sets itself."""
    missing = [path for path, f, _ in settings.leaves(RunConfig)
               if "help" not in f.metadata and path not in SPECIAL and path not in RUNNER_SET]
    assert missing == []


def test_every_setting_reaches_the_runner_config_from_the_cli_a_job_and_the_json_form(tmp_path, includes) -> None:
    values = all_settings(tmp_path)
    assert len(values) > 50  # the whole run: selection, frames, prompts, sampling, engine, server, cache, ...
    owned = set(server_owned())

    # The command line: every flag at once, each field at its non-default value.
    argv = [a for path, v in values if path not in RUNNER_SET and path != ("shard",) for a in argv_of(path, v)]
    cfg = config_from_args(parse_run(argv), shard=(1, 3))
    for path, value in values:
        if path not in RUNNER_SET:
            assert value_at(cfg, path) == value, path

    # The JSON form training validation passes (through real JSON text): the same object back.
    full = dataclasses.replace(cfg, engine=RunConfig.from_json(
        {"model": "m", "engine": {p[1]: v for p, v in values if p[0] == "engine"}}).engine)
    again = RunConfig.from_json(json.loads(json.dumps(full.to_json())))
    assert again == full
    for path, value in values:
        assert value_at(again, path) == value, path

    # Training validation: `validation.run` in a training config (YAML text, read by the trainer's loader) reaches
    # the RunConfig every rank's validation runs; the fields the trainer sets itself are refused by name.
    from vbench_async.train.config import VALIDATION_OWNED, load_config

    form = json.loads(json.dumps(full.to_json()))
    train_yaml = tmp_path / "train.yaml"
    train_yaml.write_text(yaml.safe_dump({"data": {"records": "r.json"}, "validation": {
        "every": 1, "run": {k: v for k, v in form.items() if k not in VALIDATION_OWNED}}}))
    validation = load_config(train_yaml).validation.run_config("m", tmp_path / "val", "hf", (1, 2))
    for path, value in values:
        if path[0] not in VALIDATION_OWNED:
            assert value_at(validation, path) == value, path
    for trainers in VALIDATION_OWNED:
        train_yaml.write_text(yaml.safe_dump({"data": {"records": "r.json"}, "validation": {
            "every": 1, "run": {"selection": {"suite": "demo"}, trainers: form[trainers]}}}))
        with pytest.raises(UserError, match=f"validation.run: {trainers} cannot be set here"):
            load_config(train_yaml)

    # A server job: `run --server` sends the job's fields; the server's own come from `serve`'s flags.
    job_argv = [a for path, v in values if path[0] not in owned and path not in RUNNER_SET for a in argv_of(path, v)]
    serve_argv = [a for path, v in values
                  if path[0] in owned and path not in RUNNER_SET and path[0] not in ("progress", "shard")
                  for a in argv_of(path, v)]
    job = json.loads(json.dumps(job_from_run_args(parse_run(job_argv))))
    base = base_config(cli.build_parser("serve").parse_args(["serve", "--model", values[0][1], *serve_argv]))
    served = JobSpec.from_json(job).run_config(base)
    for path, value in values:
        if path in RUNNER_SET or path[0] in ("progress", "shard"):
            continue  # a job's run has no progress bar and no shard: the server's process
        assert value_at(served, path) == value, path


def test_run_server_refuses_a_server_setting_instead_of_dropping_it(tmp_path) -> None:
    args = parse_run(["--model", "m", "--suite", "demo", "--max-num-seqs", "3", "--cache-dir", str(tmp_path)])
    with pytest.raises(UserError, match=r"--server: cache_dir, engine.max_num_seqs are the server's own settings"):
        job_from_run_args(args)


def test_the_json_form_checks_what_the_flags_check() -> None:
    for bad, message in [({"concurrency": 0}, "concurrency must be at least 1"),
                         ({"sampling": {"top_p": 0}}, "sampling.top_p must be more than 0"),
                         ({"frame_overrides": {"fps": -1}}, "frame_overrides.fps must be more than 0"),
                         ({"cache_max_gb": -1}, "cache_max_gb must be at least 0"),
                         ({"engine": {"max_num_seqz": 1}}, r"unknown field\(s\) engine.max_num_seqz"),
                         ({"mode": "fast"}, "mode must be one of")]:
        with pytest.raises(UserError, match=message):
            RunConfig.from_json({"model": "m", **bad})


def open_card(tmp_path: Path) -> tuple[Path, Path]:
    """A user's card (`new-benchmark`) whose records name videos that are not there: a run of it records every
    sample as a failure and starts no engine. Returns (cards folder, data root)."""
    data = tmp_path / "data"
    data.mkdir()
    recs = data / "my.jsonl"
    recs.write_text("".join(json.dumps({"problem_id": f"q{i}", "problem": "Which colour?", "problem_type": "mcq",
                                        "options": ["A. grey", "B. red"], "solution": "<answer>A</answer>",
                                        "path": f"gone{i}.mp4"}) + "\n" for i in range(2)))
    cards = tmp_path / "cards"
    assert cli.main(["new-benchmark", "my-open", "--from-records", str(recs), "--data-root", str(data),
                     "-o", str(cards)]) == 0
    return cards, data


def test_run_server_records_the_prompt_variant_the_name_and_the_judge_in_the_jobs_manifest(tmp_path, includes):
    """`run --server URL ... --prompt-variant predecessor --name mine --judge-model J`: the job carries all three
    and its run directory's manifest records them (a real HTTP server on 127.0.0.1, the real job worker)."""
    import threading

    from vbench_async.backends.openai import ServerSettings
    from vbench_async.serve.api import make_http_server
    from vbench_async.serve.paths import JobPaths
    from vbench_async.serve.server import EvalServer

    cards, data = open_card(tmp_path)
    evals = EvalServer(RunConfig(model="tiny-qwen2.5-vl", backend="openai",
                                 server=ServerSettings(base_url="http://127.0.0.1:9/v1")),
                       paths=JobPaths.of(tmp_path, [tmp_path], [tmp_path]))  # the folders its jobs may use
    httpd = make_http_server(evals, "127.0.0.1", 0, None)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out = tmp_path / "out"
    try:
        code = cli.main(["run", "--server", f"http://127.0.0.1:{httpd.server_address[1]}", "--model",
                         "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks", "my-open", "--data-root",
                         str(data), "--prompt-variant", "predecessor", "--name", "mine", "--judge-model", "J",
                         "--output-dir", str(out), "--no-progress"])
    finally:
        httpd.shutdown()
        httpd.server_close()
        evals.close()
    assert code == 1  # both samples failed (their videos are gone): recorded, not an error of the job
    manifest = json.loads((out / "manifest.json").read_text())
    run = manifest["run_config"]
    assert (run["prompt"]["prompt_variant"], run["name"], run["judge_model"]) == ("predecessor", "mine", "J")
    assert manifest["prompt_variant"] == "predecessor" and manifest["judge"]["model"] == "J"
    assert json.loads((out / "summary.json").read_text())["model"] == "mine"
    assert run["selection"]["include"] == [str(cards.resolve())]  # the run remembers where its card lives
    # The job's run directory is a plain run's: its log, and its own site with the run's row.
    assert (out / "logs" / "engine.log").is_file()
    assert "mine" in (out / "leaderboard" / "index.html").read_text()


def test_judge_finds_the_runs_own_cards_and_says_so_before_an_engine_when_they_are_gone(tmp_path, includes, capsys):
    """`judge RUN_DIR` on a run of an included card needs no --include (the manifest remembers the folder); with the
    folder gone it exits 2 naming it, before its console (and so any engine) starts."""
    import shutil

    saved = list(include._added)
    cards, data = open_card(tmp_path)
    out = tmp_path / "run"
    assert cli.main(["run", "--model", "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks", "my-open",
                     "--data-root", str(data), "--output-dir", str(out), "--no-site", "--no-progress",
                     "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"]) == 1
    include._added[:] = saved  # a new process: only the manifest knows the folder now
    judge = ["judge", str(out), "--judge-model", "J", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
             "--no-site"]
    assert cli.main(judge) == 0, capsys.readouterr().err
    include._added[:] = saved
    shutil.move(cards, tmp_path / "moved")
    log = out / "logs" / "engine.log"
    size = log.stat().st_size
    capsys.readouterr()
    assert cli.main(judge) == 2
    err = capsys.readouterr().err
    assert f"this run's benchmark 'my-open' has no card; the run read its cards from {cards.resolve()}, which is " \
           "gone" in err, err
    assert log.stat().st_size == size  # the judge's console never opened: no engine was started


def test_a_no_op_rerun_keeps_the_earlier_record_and_says_all_is_done(tmp_path, includes, capsys):
    """Re-running a finished run: its start line says "N of N already done, nothing to run", and summary.json and
    manifest.json keep the earlier run's stats and timings, with the re-check's time beside them."""
    cards, data = open_card(tmp_path)
    out = tmp_path / "run"
    argv = ["run", "--model", "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks", "my-open", "--data-root",
            str(data), "--output-dir", str(out), "--no-site", "--no-progress", "--backend", "openai", "--base-url",
            "http://127.0.0.1:9/v1"]
    assert cli.main(argv) == 1  # its two samples fail (videos gone): a complete run of two recorded failures
    first_summary = json.loads((out / "summary.json").read_text())
    first_manifest = json.loads((out / "manifest.json").read_text())
    assert first_summary["complete"] and first_summary["run"]
    capsys.readouterr()
    assert cli.main(argv) == 1
    assert "start: model tiny-qwen2.5-vl: 2 of 2 already done, nothing to run" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert summary["run"] == first_summary["run"] and summary["wall_s"] == first_summary["wall_s"]
    for key in ("throughput", "started_at", "finished_at", "duration_s"):
        assert manifest[key] == first_manifest[key], key
    assert len(manifest["rechecked_at"]) == 1 and summary["rechecked_at"] == manifest["rechecked_at"]
