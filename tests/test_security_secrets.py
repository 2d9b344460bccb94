"""No secret at rest: `run --backend openai --api-key KEY` against a fake OpenAI-compatible server on 127.0.0.1, a
server started with a token (its command line as `serve --token T` gives it) taking a job into the directory that run
holds (so it quotes the lock note back over HTTP) and then a job of its own, and `leaderboard` over both: neither the
key nor the token is in any file they write (manifests, lock notes, logs, result lines, both sites, runs.json) or in
any answer of the server."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from support.fault_server import FaultServer, fault_suite, openai_args, wait_until
from test_security_server import allowed, openai_base, serving

from vbench_async.cli import main as cli_main
from vbench_async.redact import REDACTED, redact_argv, scrub
from vbench_async.results.manifest import plain
from vbench_async.serve import client

KEY = "sk-planted-api-key-7f3a9c"
TOKEN = "planted-serve-token-51d2e8"


def test_redaction_of_command_lines_and_values() -> None:
    argv = ["vbench-async", "run", "--api-key", "k1-secret", "--api-key=k2-secret", "--api-k", "k3-secret",
            "--server", "http://127.0.0.1:8765", "--server-token", "t1-secret", "--token=t2-secret",
            "--max-tokens", "8"]
    shown = redact_argv(argv)
    assert not any("secret" in a for a in shown), shown
    assert "http://127.0.0.1:8765" in shown and shown[-2:] == ["--max-tokens", "8"]
    @dataclasses.dataclass
    class Settings:  # any setting marked secret, whatever its name
        hub_credential: str | None = dataclasses.field(default=None, metadata={"secret": True})
        unset_key: str | None = dataclasses.field(default=None, metadata={"secret": True})
        name: str = "public"

    assert plain(Settings("hf_abc")) == {"hub_credential": REDACTED, "unset_key": None, "name": "public"}
    assert scrub({"api_key": "x", "n": {"token": "y"}, "url": "http://me:pw@host/v1", "token_count": 3}) == {
        "api_key": REDACTED, "n": {"token": REDACTED}, "url": f"http://me:{REDACTED}@host/v1", "token_count": 3}


def test_no_secret_reaches_any_artefact(tmp_path: Path, monkeypatch) -> None:
    data_map = fault_suite(tmp_path / "data", ["slow"] * 2)  # a second each: the server's job meets the lock
    out, served, cache = tmp_path / "out", tmp_path / "served", tmp_path / "cache"
    job = {"selection": {"benchmarks": ["mmvu"], "data_root": str(data_map)},
           "frame_overrides": {"max_frames": 4, "max_pixels": 16384}, "sampling": {"max_tokens": 8}}
    answers: list[str] = []
    with FaultServer() as fake:
        args = openai_args(data_map, out, cache, fake.url, "--concurrency", "1", "--api-key", KEY)
        monkeypatch.setattr(sys, "argv", ["vbench-async", "serve", "--model", "tiny-qwen2.5-vl", "--backend",
                                          "openai", "--base-url", fake.url, "--token", TOKEN])
        with open(tmp_path / "run.log", "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "vbench_async", *args], cwd=REPO, stdout=log,
                                    stderr=subprocess.STDOUT)
        try:
            with serving(openai_base(fake.url, cache), TOKEN, allowed(tmp_path)) as (_, url):
                lock = out / ".run.lock"
                wait_until(lambda: lock.is_file() and bool(lock.read_text().strip()), proc)
                note = lock.read_text()
                assert "--api-key" in note and KEY not in note, note
                # A job into the directory the run holds: refused, naming the run's command (without its key).
                busy = client.wait(url, client.submit(url, {**job, "output_dir": str(out)}, TOKEN)["id"], TOKEN,
                                   poll_s=0.05)
                assert busy["status"] == "failed" and "being written by another process" in busy["error"], busy
                assert proc.wait(timeout=300) == 0, (tmp_path / "run.log").read_text()[-3000:]
                done = client.wait(url, client.submit(url, {**job, "output_dir": str(served)}, TOKEN)["id"], TOKEN,
                                   poll_s=0.05)
                assert done["status"] == "done", done
                answers += [json.dumps(x) for x in (busy, done, client.health(url, TOKEN))]
        finally:
            if proc.poll() is None:
                proc.kill()
    site = tmp_path / "site"
    assert cli_main(["leaderboard", str(out), str(served), "-o", str(site)]) == 0
    files = [p for d in (out, served, site) for p in d.rglob("*") if p.is_file()] + [tmp_path / "run.log"]
    names = {p.name for p in files}
    assert {"manifest.json", "summary.json", "engine.log", "runs.json", ".run.lock", "index.html"} <= names, names
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data and TOKEN.encode() not in data, path
    for text in answers:
        assert KEY not in text and TOKEN not in text, text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["options"]["api_key"] == REDACTED  # a key was set, and is not shown
    assert manifest["run_config"]["server"]["api_key"] == REDACTED and "--api-key" in manifest["command"]
    assert "--token" in json.loads((served / "manifest.json").read_text())["command"]
