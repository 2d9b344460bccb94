"""A server job touches only the paths the server's own configuration allows (issue 37): its run directory inside
the output root (no `..`, no link out of it), its data root and card folders among the server's, no
`allow_outside_root` unless the server allows it, a suite file only from the server's folders; a refusal is HTTP 403
naming the path, never quoting a file. A job never replaces files it did not write (a user's summary.json,
manifest.json or leaderboard in its output_dir), and finished jobs' sites are written one at a time."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from test_run_settings import includes, open_card  # noqa: F401 - a card whose samples fail without an engine
from test_security_server import serving

from vbench_async import cli
from vbench_async.backends.openai import ServerSettings
from vbench_async.cli.serve import eval_server, job_paths
from vbench_async.errors import UserError
from vbench_async.evaluation.runner import RunConfig
from vbench_async.serve import client
from vbench_async.serve.jobs import JobSpec
from vbench_async.serve.paths import JobPaths, PathRefused, check_own_run_dir
from vbench_async.serve.server import EvalServer

BASE = RunConfig(model="tiny-qwen2.5-vl", backend="openai", server=ServerSettings(base_url="http://127.0.0.1:9/v1"))
SECRET = "hunter2-never-shown"


def test_a_job_may_touch_only_the_servers_folders(tmp_path: Path) -> None:
    runs, data, cards, elsewhere = (tmp_path / n for n in ("runs", "data", "cards", "elsewhere"))
    for folder in (runs, data / "sub", cards, elsewhere):
        folder.mkdir(parents=True)
    (runs / "link").symlink_to(elsewhere)  # a link inside the output root that leads out of it
    secret = tmp_path / "private.yaml"
    secret.write_text(f"benchmarks:\n  - {SECRET}\n")
    secret.chmod(0o600)
    what = {"benchmarks": ["no-such-bench"]}
    refused = {
        "output_dir elsewhere": ({"output_dir": str(elsewhere / "run")}, "output root"),
        "output_dir with ..": ({"output_dir": str(runs / ".." / "elsewhere" / "run")}, "output root"),
        "output_dir through a link": ({"output_dir": str(runs / "link" / "run")}, "output root"),
        "data_root / outside the root": ({"selection": {**what, "data_root": "/", "allow_outside_root": True}},
                                         "allow_outside_root"),
        "data_root /": ({"selection": {**what, "data_root": "/"}}, "data roots"),
        "another data_root": ({"selection": {**what, "data_root": str(elsewhere)}}, "data roots"),
        "allow_outside_root": ({"selection": {**what, "data_root": str(data), "allow_outside_root": True}},
                               "allow_outside_root"),
        "include from anywhere": ({"selection": {**what, "include": [str(elsewhere)]}}, "card folders"),
        "a suite file from anywhere": ({"selection": {"suite": str(secret)}}, "suite"),
    }
    paths = JobPaths.of(runs, [data], [cards])
    with serving(BASE, paths=paths) as (evals, url):
        shown = client.health(url)["paths"]  # what a client may use (model folders: test_security_serve_models.py)
        assert {k: v for k, v in shown.items() if k != "model_roots"} == {
            "output_root": str(runs.resolve()), "data_roots": [str(data.resolve())],
            "include_roots": [str(cards.resolve())]}
        for name, (job, words) in refused.items():
            body = {"selection": what, **job}
            with pytest.raises(UserError, match="HTTP 403") as caught:
                client.submit(url, body)
            assert words in str(caught.value) and SECRET not in str(caught.value), (name, caught.value)
        assert evals.jobs() == []  # nothing queued
        ok = client.submit(url, {"selection": {**what, "data_root": str(data / "sub"), "include": [str(cards)]},
                                 "output_dir": str(runs / "ok")})  # inside every allowed folder: queued
        assert client.wait(url, ok["id"], poll_s=0.05)["status"] == "failed"  # unknown benchmark: its own failure
    assert list(elsewhere.iterdir()) == []  # nothing was written outside the output root

    # A server without paths of its own: run directories under ./runs only.
    assert JobPaths.of().output_root == (Path.cwd() / "runs").resolve()
    evals = EvalServer(BASE)
    try:
        with pytest.raises(PathRefused, match="outside this server's output root"):
            evals.submit(JobSpec.from_json({"selection": what, "output_dir": str(tmp_path / "x")}))
    finally:
        evals.close()
    # `serve`'s options make the server's paths.
    args = cli.build_parser("serve").parse_args(["serve", "--model", "m", "--output-root", str(runs), "--data-root",
                                                 str(data), "--allow-outside-root"])
    made = job_paths(args)
    assert (made.output_root, made.data_roots, made.allow_outside_root) == (runs.resolve(), (data.resolve(),), True)
    with pytest.raises(UserError, match="is not a folder"):
        job_paths(cli.build_parser("serve").parse_args(["serve", "--model", "m", "--data-root", str(tmp_path / "no")]))


def test_a_job_never_replaces_files_it_did_not_write(tmp_path: Path, includes) -> None:  # noqa: F811
    cards, data = open_card(tmp_path)
    runs = tmp_path / "runs"
    mine = runs / "mine"
    (mine / "leaderboard").mkdir(parents=True)
    users = {"summary.json": json.dumps({"benchmarks": {"mine": {"score": 100.0}}}),
             "manifest.json": json.dumps({"written_by": "me", "secret": SECRET}),
             "leaderboard/index.html": "<h1>my own board</h1>"}
    for rel, text in users.items():
        (mine / rel).write_text(text)
    notes = runs / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text(SECRET)
    only_summary = runs / "only-summary"
    only_summary.mkdir()
    (only_summary / "summary.json").write_text(json.dumps({"benchmarks": {}}))
    job = {"selection": {"benchmarks": ["my-open"], "include": [str(cards)], "data_root": str(data)}}
    with serving(BASE, paths=JobPaths.of(runs, [data], [cards])) as (evals, url):
        for folder, words in ((mine, "no manifest a run wrote"), (notes, "'todo.txt', which no run wrote"),
                              (only_summary, "no manifest a run wrote")):
            with pytest.raises(UserError, match="HTTP 403") as caught:
                client.submit(url, {**job, "output_dir": str(folder)})
            assert words in str(caught.value) and SECRET not in str(caught.value), caught.value
        assert evals.jobs() == []
        # A run directory a job wrote is resumed by the next job into it (as `run` resumes it).
        for _ in range(2):
            done = client.wait(url, client.submit(url, {**job, "output_dir": str(runs / "real"), "site": False})["id"],
                               poll_s=0.05)
            assert done["status"] == "done", done
    for rel, text in users.items():
        assert (mine / rel).read_text() == text, rel
    assert (notes / "todo.txt").read_text() == SECRET
    check_own_run_dir(runs / "real")  # what a run wrote passes
    (runs / "real" / "manifest.json").write_text("[]")  # not a run's manifest any more
    with pytest.raises(PathRefused, match="no manifest a run wrote"):
        check_own_run_dir(runs / "real")


class _Builds:
    """subprocess.Popen for the site builds: counts those running (started, not yet waited for)."""

    running = 0
    most = 0
    started: list[str] = []
    lock = threading.Lock()

    def __init__(self, command, **_kwargs):
        with _Builds.lock:
            _Builds.started.append(command[command.index("-o") + 1])
            _Builds.running += 1
            _Builds.most = max(_Builds.most, _Builds.running)

    def wait(self, timeout=None) -> int:
        time.sleep(0.01)
        with _Builds.lock:
            _Builds.running -= 1
        return 0


def test_finished_jobs_sites_are_written_one_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """30 jobs end back to back: once the queue is idle their 30 sites are built, one build at a time (not 30
    processes at once), each once. The jobs are stand-ins (no evaluation); the site hook is `serve`'s own."""
    import subprocess

    from vbench_async.serve import server

    def fake_run(self: EvalServer, job) -> None:
        run_dir = Path(job.spec.to_json()["output_dir"])
        run_dir.mkdir(parents=True)
        job.run_dir, job.site, job.status = str(run_dir), self._site_due(run_dir), "done"
        job.finished_at = time.time()

    monkeypatch.setattr(server, "SITE_GRACE_S", 0.2)
    monkeypatch.setattr(EvalServer, "_run", fake_run)
    monkeypatch.setattr(subprocess, "Popen", _Builds)
    monkeypatch.setattr(_Builds, "started", [])
    evals = eval_server(BASE, JobPaths.of(tmp_path))
    try:
        jobs = [evals.submit(JobSpec.from_json({"selection": {"suite": "demo"}, "output_dir": str(tmp_path / f"j{i}")}))
                for i in range(30)]
        deadline = time.monotonic() + 60
        while len(_Builds.started) < 30 or _Builds.running:
            assert time.monotonic() < deadline, (len(_Builds.started), _Builds.running)
            time.sleep(0.02)
    finally:
        evals.close()
    assert all(j.status == "done" for j in jobs)
    assert sorted(_Builds.started) == sorted(str(tmp_path / f"j{i}" / "leaderboard") for i in range(30))
    assert _Builds.most == 1, _Builds.most
    assert evals.health()["sites_queued"] == 0
