"""Issue 37's reproductions, replayed as the report ran them and only through what a user had before the fixes (the
HTTP API of a server with its default settings, `vbench-async serve`, `run` and `leaderboard`), so that each fails
on the code before them, not only on a name it lacked: another local user's jobs naming a private suite file, a
folder in a private home, `/` as data root, card folders from anywhere or a folder holding the user's own results;
a long path or job name that held the server for minutes; URL userinfo and a key a 401 repeats reaching files; a
manifest field that made `leaderboard` crawl. tests/test_security_*.py hold the finer cases of each."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import REPO
from support.fault_server import LocalServer, fault_suite, openai_args
from support.processes import stop_group
from test_leaderboard_runs import make_run, right
from test_security_server import serving

from vbench_async.backends.openai import ServerSettings
from vbench_async.errors import UserError
from vbench_async.evaluation.runner import RunConfig
from vbench_async.serve import client

SECRET = "hunter2-line-two-never-shown"
BASE = RunConfig(model="tiny-qwen2.5-vl", backend="openai", server=ServerSettings(base_url="http://127.0.0.1:9/v1"))


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"" for p in sorted(folder.rglob("*"))}


WHAT = {"benchmarks": ["demo-mc"]}
# Each a job another local user posts, given the victim's private home and a folder of the victim's own results.
ATTACKS = {
    "a private suite file": lambda home, mine: {"selection": {"suite": str(home / "credentials")}},
    "output_dir in a private home": lambda home, mine: {"selection": WHAT, "output_dir": str(home / "results")},
    "data_root / outside the root": lambda home, mine: {"selection": {**WHAT, "data_root": "/",
                                                                      "allow_outside_root": True}},
    "a card folder from anywhere": lambda home, mine: {"selection": {**WHAT, "include": [str(home / "cards")]}},
    "a folder of the user's own results": lambda home, mine: {"selection": WHAT, "output_dir": str(mine)},
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_another_users_job_touches_nothing_outside_a_default_servers_folders(attack: str, tmp_path: Path,
                                                                            monkeypatch) -> None:
    """A server with its default settings (run directories under ./runs, the default data root, no card folder)
    refuses, with 403 and before anything is read or written: a private suite file (its error quoted the file's
    second line), an output_dir in a private home (filled with results and a site), `/` as data root with
    allow_outside_root, a card folder from anywhere, and a folder under ./runs holding the user's own results
    (replaced, and reported `done`)."""
    home = tmp_path / "victim"  # the server's user's private home
    (home / "cards").mkdir(parents=True)
    (home / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    (home / "credentials").chmod(0o600)
    home.chmod(0o700)
    monkeypatch.chdir(tmp_path)  # the server's working directory: its run directories go under ./runs
    mine = tmp_path / "runs" / "mine"
    (mine / "leaderboard").mkdir(parents=True)
    (mine / "summary.json").write_text(json.dumps({"benchmarks": {"mine": {"score": 100.0}}}))
    (mine / "manifest.json").write_text(json.dumps({"written_by": "me"}))
    (mine / "leaderboard" / "index.html").write_text("<h1>my own board</h1>")
    before = {home: _listing(home), mine: _listing(mine)}
    with serving(BASE) as (evals, url):
        with pytest.raises(UserError, match="HTTP 403") as caught:
            client.submit(url, ATTACKS[attack](home, mine))
        assert SECRET not in str(caught.value), caught.value
        assert evals.jobs() == []  # nothing queued
        with urllib.request.urlopen(f"{url}/jobs", timeout=10) as answer:
            assert SECRET not in answer.read().decode()
    assert {home: _listing(home), mine: _listing(mine)} == before


# -- long input: the server answers at once, and so does everyone else ------------------------------------------------


def _start_serve(tmp_path: Path, token: str) -> tuple[subprocess.Popen, str]:
    """`vbench-async serve` in its own session, working in `tmp_path` (its ./runs), against a closed port."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.Popen([sys.executable, "-m", "vbench_async", "serve", "--port", "0", "--token", token,
                             "--model", "tiny-qwen2.5-vl", "--backend", "openai", "--base-url",
                             "http://127.0.0.1:9/v1", "--log-dir", str(tmp_path / "log")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()
    if "http://127.0.0.1:" not in line:
        stop_group(proc)
        raise AssertionError(f"serve did not start: {line!r}")
    return proc, line.split(" on ", 1)[1].split()[0]


def _timed(method: str, url: str, token: str, body: dict | None = None, timeout: float = 60) -> tuple[int, float]:
    """(HTTP status, seconds to the answer); status 0 when none came within `timeout`."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}"})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            answer.read()
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError:  # no answer in time
        status = 0
    return status, time.monotonic() - t0


def test_a_long_path_or_job_name_never_holds_the_server(tmp_path: Path) -> None:
    """`GET /jobs/` + 60,000 letters (answered after 28.8 s, `/health` waiting as long) and a job named with 900,000
    letters (the server stopped answering, SIGTERM ignored) are answered at once, and `/health` meanwhile too."""
    token = "replay-token-5c1e"
    proc, url = _start_serve(tmp_path, token)
    try:
        assert _timed("GET", f"{url}/health", token)[0] == 200
        hostile = {"path": ("GET", f"{url}/jobs/{'a' * 60_000}", None),
                   "name": ("POST", f"{url}/jobs", {"selection": {"benchmarks": ["no-such-bench"]},
                                                    "name": "a" * 900_000})}
        answers: dict[str, tuple[int, float]] = {}
        threads = [threading.Thread(target=lambda k=k, m=m, u=u, b=b: answers.__setitem__(k, _timed(m, u, token, b)),
                                    daemon=True) for k, (m, u, b) in hostile.items()]
        for t in threads:
            t.start()
        time.sleep(0.5)
        health = _timed("GET", f"{url}/health", token, timeout=30)
        for t in threads:
            t.join(90)
        # Seconds on a shared 2-core machine; milliseconds alone. The quadratic pattern needed minutes to hours.
        assert health[0] == 200 and health[1] < 10, health
        for name, (status, took) in answers.items():
            assert 200 <= status < 500 and took < 20, (name, status, took)
        assert proc.poll() is None  # still up
    finally:
        stop_group(proc)
    assert proc.returncode is not None


def _leaderboard_cpu_s(run: Path, site: Path) -> float:
    """CPU seconds of `vbench-async leaderboard RUN -o SITE` (the machine is shared: wall time measures neighbours)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "vbench_async", "leaderboard", str(run), "-o", str(site)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def test_leaderboard_over_a_long_manifest_field_takes_no_longer(tmp_path: Path) -> None:
    """A manifest field of 100,000 letters (40,000 took `leaderboard` 25.4 s instead of 1.6 s): the same command
    over the same run takes about as long as with a short field."""
    run = make_run(tmp_path / "run", "model-long", right, benchmarks=("demo-mc",), keep=3)
    manifest = json.loads((run / "manifest.json").read_text())
    short = _leaderboard_cpu_s(run, tmp_path / "site-short")
    (run / "manifest.json").write_text(json.dumps({**manifest, "command": ["vbench-async", "a" * 100_000]}))
    try:
        long = _leaderboard_cpu_s(run, tmp_path / "site-long")
    except subprocess.TimeoutExpired:
        pytest.fail("leaderboard over a 100,000-letter manifest field ran past 120 s")
    assert long < short + 5, (short, long)


# -- secrets in the server's URL and in its answers reach no file -----------------------------------------------------


class EchoingServer(LocalServer):
    """An OpenAI-compatible server that refuses every request with 401, repeating the Authorization it was sent (as
    some servers do); records what it received."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - no model listing: the run goes on to its requests
                self._answer(404, b'{"error": "no listing"}')

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                given = self.headers.get("Authorization", "")
                server.seen.append(given)
                self._answer(401, json.dumps({"error": {"message": f"invalid credentials: {given}"}}).encode())

        self._serve(Handler)


def test_userinfo_and_a_key_the_server_repeats_reach_no_file(tmp_path: Path) -> None:
    """`run --base-url http://alice:PASSWORD@...` (the password in engine.log's start line, httpx's request log and
    the console), `--base-url http://TOKEN@...` (userinfo without a colon: the manifest, the summary, runs.json and
    the run's page) and a 401 repeating `Bearer KEY` (result lines, the samples page, its CSV and JSON, the
    console), then `leaderboard` over the three runs: no secret is in any file or on any console, nor the Basic
    credentials httpx makes of the userinfo (which the 401s repeat)."""
    password, token, key = "pw-replayed-2f9d41", "tok-replayed-7a3c55", "sk-replayed-key-9e0b12"
    data_map = fault_suite(tmp_path / "data", ["ok", "ok"])
    consoles, runs = [], []
    with EchoingServer() as fake:
        host = fake.url.removeprefix("http://")
        for name, url, extra in (("password", f"http://alice:{password}@{host}", ()),
                                 ("token", f"http://{token}@{host}", ()),
                                 ("key", fake.url, ("--api-key", key))):
            out = tmp_path / name
            proc = subprocess.run([sys.executable, "-m", "vbench_async",
                                   *openai_args(data_map, out, tmp_path / "cache", url, *extra)],
                                  cwd=REPO, capture_output=True, text=True, timeout=600)
            assert (out / "summary.json").is_file(), proc.stderr[-3000:]
            consoles.append(proc.stdout + proc.stderr)
            runs.append(out)
    assert f"Bearer {key}" in fake.seen, fake.seen  # the key was sent, and repeated in its 401s
    basic = [base64.b64encode(f"{user}:{pw}".encode()).decode() for user, pw in (("alice", password), (token, ""))]
    assert all(f"Basic {b}" in fake.seen for b in basic), fake.seen
    lines = [json.loads(x) for run in runs for f in (run / "results").glob("*.jsonl") for x in f.read_text().split("\n")
             if x.strip()]
    assert lines and all((x.get("error") or {}).get("kind") == "server_error" for x in lines), lines
    site = tmp_path / "site"
    board = subprocess.run([sys.executable, "-m", "vbench_async", "leaderboard", *map(str, runs), "-o", str(site)],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert board.returncode == 0, board.stderr[-3000:]
    consoles.append(board.stdout + board.stderr)
    files = [p for d in (*runs, site) for p in d.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"engine.log", "manifest.json", "summary.json", "runs.json"} <= names, names
    assert any(n.endswith(".samples.csv") for n in names) and any(n.endswith(".samples.json") for n in names), names
    leaked = {secret: [str(p.relative_to(tmp_path)) for p in files if secret.encode() in p.read_bytes()]
              + [f"console of {runs[i].name if i < len(runs) else 'leaderboard'}"
                 for i, text in enumerate(consoles) if secret in text]
              for secret in (password, token, key, *basic)}
    assert not any(leaked.values()), leaked
