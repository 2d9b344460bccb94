"""A server job's model is confined like its other paths (issue 37): a job whose `model` (or, with an in-process
backend, its `judge_model`) names a local folder must name one inside the server's model folders: the server's own
`--model`, the built tiny models (the vbench home's `models/`) and `serve --model-root DIR`. Anything else is HTTP 403
naming the rule and the flag, never quoting the folder's files: loading a model reads its config.json and weights as
the server's user, and an unsupported `model_type` used to come back in the job's error. A tiny-* name or a hub id
names no folder and stays allowed."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from test_security_server import serving

from vbench_async import cli
from vbench_async.backends.openai import ServerSettings
from vbench_async.errors import UserError
from vbench_async.evaluation.runner import RunConfig
from vbench_async.serve import client

SECRET = "hunter2-model-type-never-shown"
SELECTION = {"benchmarks": ["no-such-bench"]}  # a job that is queued fails on its own, without an engine


def private_model(home: Path) -> Path:
    """Another user's folder in all but ownership: a model directory whose config.json holds a secret (0600)."""
    folder = home / "private-model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": SECRET, "note": SECRET}))
    (folder / "config.json").chmod(0o600)
    home.chmod(0o700)
    return folder


def answers(url: str) -> str:
    """Everything the server tells a client about its jobs."""
    with urllib.request.urlopen(f"{url}/jobs", timeout=10) as answer:
        return json.dumps(client.health(url)) + answer.read().decode()


def test_a_job_naming_a_private_folder_as_its_model_is_refused(tmp_path: Path, monkeypatch) -> None:
    """An in-process backend (hf) loads the job's model itself: a private folder, reached directly, through `..`, a
    link or a hub-id-shaped relative name, is refused with 403 at submission, and so is a path that does not exist
    (no oracle); nothing is queued, and no answer quotes the folder's config.json."""
    private = private_model(tmp_path / "home")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "link").symlink_to(private)
    monkeypatch.chdir(tmp_path)  # the server's working directory: "home/private-model" names a folder there
    refused = {
        "a private folder": {"model": str(private)},
        "through ..": {"model": str(tmp_path / "models" / ".." / "home" / "private-model")},
        "through a link": {"model": str(tmp_path / "models" / "link")},
        "a hub-id-shaped local folder": {"model": "home/private-model"},
        "a folder that does not exist": {"model": str(tmp_path / "home" / "nothing-here")},
        "the judge model": {"judge_model": str(private)},
    }
    base = RunConfig(model="tiny-qwen2.5-vl", backend="hf")  # in-process: never started by a refused job
    with serving(base) as (evals, url):
        for name, job in refused.items():
            with pytest.raises(UserError, match="HTTP 403") as caught:
                client.submit(url, {"selection": SELECTION, **job})
            message = str(caught.value)
            assert "model folders" in message and "--model-root" in message, (name, message)
            assert SECRET not in message, (name, message)
        assert evals.jobs() == [], [j.to_json() for j in evals.jobs()]  # nothing queued, nothing read
        assert SECRET not in answers(url)


def test_a_job_may_name_the_servers_models_tiny_models_and_hub_ids(tmp_path: Path) -> None:
    """What stays allowed is queued (and fails on its own, as a job against an OpenAI server for another model does):
    a checkpoint inside `--model-root`, the server's own local model (named or not), a tiny-* name, a hub id, and
    with a served judge (openai backend) a judge name, which names no file of the server's."""
    from vbench_async.cli.serve import job_paths
    from vbench_async.serve.paths import JobPaths

    private = private_model(tmp_path / "home")
    served, checkpoints = tmp_path / "served", tmp_path / "ckpts"
    (checkpoints / "step-100").mkdir(parents=True)
    served.mkdir()
    for folder in (served, checkpoints / "step-100"):
        (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    base = RunConfig(model=str(served), backend="openai", server=ServerSettings(base_url="http://127.0.0.1:9/v1"))
    paths = JobPaths.of(tmp_path / "runs", model_roots=[checkpoints])
    allowed = {
        "a checkpoint inside --model-root": {"model": str(checkpoints / "step-100")},
        "the server's own model, named": {"model": str(served)},
        "the server's own model, through ..": {"model": str(checkpoints / ".." / "served")},
        "the server's own model, unnamed": {},
        "a tiny model": {"model": "tiny-qwen2-vl"},
        "a hub id": {"model": "Org/no-such-model"},
        "a served judge's name": {"judge_model": str(private)},
    }
    with serving(base, paths=paths) as (evals, url):
        assert str(checkpoints.resolve()) in client.health(url)["paths"]["model_roots"]
        for name, job in allowed.items():
            record = client.submit(url, {"selection": SELECTION, **job})  # 202: not refused
            done = client.wait(url, record["id"], poll_s=0.05)
            reasons = ("start a server for", "unknown benchmark 'no-such-bench'")  # its own failure, past the check
            assert done["status"] == "failed" and any(r in done["error"] for r in reasons), (name, done)
        with pytest.raises(UserError, match="HTTP 403.*--model-root"):
            client.submit(url, {"selection": SELECTION, "model": str(private)})
        assert SECRET not in answers(url)

    # `serve`'s options: --model-root (repeatable, folders only) and the server's own --model are model roots.
    args = cli.build_parser("serve").parse_args(["serve", "--model", str(served), "--model-root", str(checkpoints)])
    made = job_paths(args)
    assert checkpoints.resolve() in made.model_roots and served.resolve() in made.model_roots
    with pytest.raises(UserError, match="--model-root .* is not a folder"):
        job_paths(cli.build_parser("serve").parse_args(["serve", "--model", "m", "--model-root",
                                                        str(tmp_path / "no")]))


def test_serve_help_names_the_model_rule(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--model-root DIR" in text and "any other local path is refused" in text
