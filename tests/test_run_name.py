"""`--name` names the run directory the same way at every entry point: `run`, a frame-budget sweep and a server job
without an output directory all write into runs/<name> (a server: <its output root>/<name>), as `--name`'s help says.

Each run is of a card whose videos are gone (test_run_settings.open_card): every sample is recorded as a failure at
once and no engine starts, so the real entry points run in about a second each."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from test_run_settings import includes, open_card  # noqa: F401 - a card whose samples fail without an engine

from vbench_async import cli
from vbench_async.backends.openai import ServerSettings
from vbench_async.evaluation.run_config import RunConfig, resolve_run
from vbench_async.serve.api import make_http_server
from vbench_async.serve.jobs import JobSpec
from vbench_async.serve.paths import JobPaths
from vbench_async.serve.server import EvalServer

NAME = "my-run"
NOWHERE = "http://127.0.0.1:9/v1"  # an openai backend nothing is ever sent to (every sample fails before a request)


def _card_args(tmp_path: Path) -> list[str]:
    cards, data = open_card(tmp_path)
    return ["--model", "tiny-qwen2.5-vl", "--include", str(cards), "--benchmarks", "my-open", "--data-root",
            str(data), "--no-progress", "--no-site"]


def _model_in(run_dir: Path) -> str:
    return json.loads((run_dir / "summary.json").read_text())["model"]


def test_a_run_is_resolved_once_with_its_name(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = resolve_run(RunConfig(model="tiny-qwen2.5-vl", name=NAME))
    assert resolved.run_dir == Path("runs") / NAME and resolved.model.display_name == NAME
    assert resolve_run(RunConfig(model="tiny-qwen2.5-vl")).run_dir == Path("runs") / "tiny-qwen2.5-vl"
    given = RunConfig(model="tiny-qwen2.5-vl", name=NAME, output_dir=tmp_path / "out")
    assert resolve_run(given, root=tmp_path / "root").run_dir == tmp_path / "out"  # OUTPUT_DIR wins over the name


def test_run_writes_into_runs_name(tmp_path, monkeypatch, includes) -> None:  # noqa: F811
    args = _card_args(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *args, "--name", NAME, "--backend", "openai", "--base-url", NOWHERE]) == 1  # all failed
    assert _model_in(tmp_path / "runs" / NAME) == NAME
    assert not (tmp_path / "runs" / "tiny-qwen2.5-vl").exists()


def test_a_sweep_writes_its_budgets_into_runs_name(tmp_path, monkeypatch, includes) -> None:  # noqa: F811
    args = _card_args(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *args, "--name", NAME, "--backend", "openai", "--base-url", NOWHERE,
                     "--max-frames", "4,8"]) == 1
    for budget in (4, 8):
        assert _model_in(tmp_path / "runs" / NAME / f"max_frames-{budget}") == NAME
    assert not (tmp_path / "runs" / "tiny-qwen2.5-vl").exists()


def test_a_server_job_writes_into_its_output_root_name(tmp_path, includes) -> None:  # noqa: F811
    """`run --server URL --name NAME` against a real HTTP server on 127.0.0.1 and the real job worker; a name that
    would lead out of the server's output root is refused as such an output directory is."""
    args = _card_args(tmp_path)
    root = tmp_path / "runs"
    evals = EvalServer(RunConfig(model="tiny-qwen2.5-vl", backend="openai", server=ServerSettings(base_url=NOWHERE)),
                       paths=JobPaths.of(root, [tmp_path], [tmp_path]))
    httpd = make_http_server(evals, "127.0.0.1", 0, None)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        assert cli.main(["run", "--server", f"http://127.0.0.1:{httpd.server_address[1]}", *args,
                         "--name", NAME]) == 1  # both samples failed: recorded, not an error of the job
        escape = evals.submit(JobSpec.from_json({"selection": {"benchmarks": ["my-open"]}, "name": "../escape"}))
        deadline = time.monotonic() + 60
        while not escape.finished and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        httpd.shutdown()
        httpd.server_close()
        evals.close()
    [job] = [j for j in evals.jobs() if j is not escape]
    assert job.status == "done" and job.run_dir == str(root.resolve() / NAME), (job.status, job.error)
    assert _model_in(root / NAME) == NAME
    assert escape.status == "failed" and "outside this server's output root" in (escape.error or ""), escape.error
    assert not (tmp_path / "escape").exists()
