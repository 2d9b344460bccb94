"""`vbench-async serve` is its user's alone by default (issue 37): it used to take jobs from any local user on
loopback. Now it makes a secret at start, in a file only its user may read (0600 in a 0700 folder), and refuses every
request without it (`/health` too); the client and `run --server` read the file themselves, only for a loopback
server; the file is removed when the server stops, and the secret is in no file the server writes."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO
from support.processes import stop_group

from vbench_async.serve import client


def _get(url: str, token: str | None = None) -> int:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_requires_its_own_secret_by_default(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != client.TOKEN_ENV}
    env["VBENCH_ASYNC_HOME"] = str(home)
    monkeypatch.setenv("VBENCH_ASYNC_HOME", str(home))
    monkeypatch.delenv(client.TOKEN_ENV, raising=False)
    console = tmp_path / "console.txt"
    with console.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "vbench_async", "serve", "--port", "0", "--model",
                                 "tiny-qwen2.5-vl", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                                 "--log-dir", str(tmp_path / "log")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:(\d+))", line)
        assert match, line
        url, port = match.group(1), int(match.group(2))
        path = client.token_path(port)
        assert str(path) in line and path.is_file(), line
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        token = path.read_text().strip()
        assert len(token) >= 32

        assert _get(f"{url}/health") == 401  # no secret: refused, /health included
        assert _get(f"{url}/jobs", "not-the-token") == 401
        assert _get(f"{url}/health", token) == 200
        assert client.health(url)["ok"]  # the client found the file itself
        assert client.own_server_token(f"http://192.0.2.1:{port}") is None  # never sent to another host

        system_python = shutil.which("python3", path="/usr/bin:/bin")  # one the other user may run
        if os.getuid() == 0 and system_python:  # another local user: cannot read the file, is refused without it
            probe = textwrap.dedent(f"""
                import json, urllib.request, urllib.error
                out = {{}}
                try:
                    open({str(path)!r}).read(); out["read"] = True
                except OSError:
                    out["read"] = False
                try:
                    urllib.request.urlopen({url + '/jobs'!r}, timeout=10); out["status"] = 200
                except urllib.error.HTTPError as exc:
                    out["status"] = exc.code
                print(json.dumps(out))
            """)
            other = subprocess.run([system_python, "-I", "-c", probe], user=65534, group=65534, cwd="/",
                                   capture_output=True, text=True, timeout=60)
            assert other.returncode == 0, other.stderr[-2000:]
            assert json.loads(other.stdout) == {"read": False, "status": 401}, other.stdout
    finally:
        stop_group(proc)
    assert not path.exists()  # the secret does not outlive its server
    written = [p for p in (tmp_path / "log").rglob("*") if p.is_file()] + [console]
    for p in written:
        assert token.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("url", ["http://example.com:8765", "http://10.0.0.1:8765", "not a url"])
def test_the_client_never_sends_a_local_token_elsewhere(url: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VBENCH_ASYNC_HOME", str(tmp_path))
    client.create_token_file(8765)
    assert client.own_server_token("http://127.0.0.1:8765")
    assert client.own_server_token(url) is None
