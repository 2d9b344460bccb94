"""The evaluation server's front door, against a real HTTP server on 127.0.0.1 spoken to over raw sockets: a web page
cannot submit jobs (text/plain bodies, a foreign Host as DNS rebinding gives, a foreign Origin are refused), every
malformed request gets a 4xx answer with a message at once (no traceback, no handler held), numbers are capped; and a
job whose include folder clashes with a built-in card fails alone: the next jobs, with or without include, run."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from support.fault_server import RETRIES, TIMEOUT_S, FaultServer, fault_suite

from vbench_async.backends.openai import ServerSettings
from vbench_async.errors import UserError
from vbench_async.evaluation.runner import RunConfig
from vbench_async.resources import data_dir
from vbench_async.serve import api, client
from vbench_async.serve.api import MAX_BODY, make_http_server
from vbench_async.serve.paths import JobPaths
from vbench_async.serve.server import EvalServer

JOB = {"selection": {"benchmarks": ["demo-mc"]}, "output_dir": "/nonexistent/never-written"}


@contextlib.contextmanager
def serving(base: RunConfig, token: str | None = None, paths: JobPaths | None = None
            ) -> Iterator[tuple[EvalServer, str]]:
    """An in-process evaluation server on 127.0.0.1 (any free port) for `base`; yields it and its URL. `paths`: the
    folders its jobs may use (`allowed(tmp_path)`: run directories, data roots and card folders there)."""
    evals = EvalServer(base, paths=paths)
    httpd = make_http_server(evals, "127.0.0.1", 0, token)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield evals, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        evals.close()


def allowed(folder: Path) -> JobPaths:
    """A server's folders for a test: run directories, data roots and card folders all inside `folder`."""
    return JobPaths.of(folder, [folder], [folder])


def openai_base(url: str, cache: Path) -> RunConfig:
    """The server settings of a `serve --backend openai` against `url` (the fault server's answers)."""
    return RunConfig(model="tiny-qwen2.5-vl", backend="openai", cache_dir=cache, decode_workers=1,
                     server=ServerSettings(base_url=url, max_retries=RETRIES, request_timeout=TIMEOUT_S))


def raw(url: str, request: bytes, timeout: float = 5.0) -> tuple[int, str]:
    """Send `request` as it is; (status, body) of the answer, which must come within `timeout`."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            chunk = sock.recv(65536)  # a held handler would time out here
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def request(url: str, method: str = "POST", path: str = "/jobs", body: bytes | None = None,
            headers: dict[str, str] | None = None) -> bytes:
    port = url.rsplit(":", 1)[1]
    given = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", **(headers or {})}
    if body is not None and "Content-Length" not in given:
        given["Content-Length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in given.items() if v is not None)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


@pytest.fixture(scope="module")
def tokenless():
    """The default server: loopback, no token (as `vbench-async serve` starts)."""
    with serving(RunConfig(model="tiny-qwen2.5-vl", backend="openai")) as (evals, url):
        yield evals, url


def test_a_web_page_cannot_submit_or_read(tokenless) -> None:
    evals, url = tokenless
    port = url.rsplit(":", 1)[1]
    body = json.dumps(JOB).encode()
    cases = {  # what a page can send: a "simple" text/plain POST, a rebound name, a cross-site fetch
        "text/plain": (request(url, body=body, headers={"Content-Type": "text/plain"}), 415, "application/json"),
        "no type": (request(url, body=body, headers={"Content-Type": None}), 415, "application/json"),
        "form": (request(url, body=b"a=1", headers={"Content-Type": "application/x-www-form-urlencoded"}), 415, ""),
        "foreign Host": (request(url, body=body, headers={"Host": f"attacker.example:{port}"}), 403, "Host"),
        "foreign Host on /health": (request(url, "GET", "/health", headers={"Host": f"rebind.example:{port}"}), 403,
                                    "Host"),
        "another port": (request(url, "GET", "/jobs", headers={"Host": "127.0.0.1:1"}), 403, "Host"),
        "foreign Origin": (request(url, body=body, headers={"Origin": "http://attacker.example"}), 403, "web pages"),
        "null Origin": (request(url, body=body, headers={"Origin": "null"}), 403, "web pages"),
    }
    for name, (req, status, words) in cases.items():
        got, text = raw(url, req)
        assert got == status and words in json.loads(text)["error"], (name, got, text)
    assert evals.jobs() == []  # nothing was queued
    assert client.health(url)["ok"]  # the real client still gets in, by address and by name
    with pytest.raises(UserError, match="HTTP 404: no job 'nope'"):  # its cancel passes the door, to the routing
        client.cancel(url, "nope")
    got, text = raw(url, request(url, "GET", "/health", headers={"Host": f"localhost:{port}"}))
    assert got == 200 and json.loads(text)["ok"]


MALFORMED = [
    ("Content-Length abc", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                           b"Content-Length: abc\r\n\r\n{}", 400, "Content-Length"),
    ("Content-Length -1", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                          b"Content-Length: -1\r\n\r\n{}", 400, "Content-Length"),
    ("two Content-Lengths", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", 400, "Content-Length"),
    ("chunked", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, "chunked"),
    ("over the cap", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1), 413, "over"),
    ("short body", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\nContent-Length: 50\r\n"
                   b"Connection: close\r\n\r\n{}", None, None),
    ("nested 100,000 deep", None, 400, "nests deeper"),
    ("nested 20 deep", None, 400, "nests deeper"),
    ("bad JSON on cancel", b"POST /jobs/abc/cancel HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 5\r\n\r\n{nope", 400, "not JSON"),
    ("not UTF-8", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 4\r\n\r\n\"\xff\xfe\"", 400, "not JSON"),
    # "²" is a digit to str.isdigit, not to int: headers are ASCII digits only (a 500 before; no answer on text/plain)
    ("Content-Length ²", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                         b"Content-Length: \xb2\r\n\r\n{}", 400, "Content-Length"),
    ("Content-Length ² on text/plain", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: \xb2\r\n\r\n{}", 400, "Content-Length"),
    ("Content-Length 5,000 digits", b"POST /jobs HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n"
                                    b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n{}", 413, "over"),
    ("Host port ²", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:\xb2\r\n\r\n", 400, "Host"),
    ("a huge integer", None, 400, "not JSON"),
    ("concurrency 400,000", None, 400, "concurrency"),
    ("max_frames 1e300", None, 400, "max_frames"),
    ("temperature NaN", None, 400, "temperature"),
]


def test_allowed_names_and_origins_get_in() -> None:
    evals = EvalServer(RunConfig(model="tiny-qwen2.5-vl", backend="openai"))
    httpd = make_http_server(evals, "127.0.0.1", 0, None, allowed_hosts=["proxy.example"],
                             allowed_origins=["http://ui.example:8080/"])
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        for headers, status in (({"Host": "proxy.example"}, 200), ({"Origin": "http://ui.example:8080"}, 200),
                                ({"Origin": "http://ui.example:8081"}, 403), ({"Host": "proxy.example:1"}, 403)):
            assert raw(url, request(url, "GET", "/health", headers=headers))[0] == status, headers
    finally:
        httpd.shutdown()
        httpd.server_close()
        evals.close()


@pytest.mark.parametrize("name,req,status,words", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_every_malformed_request_is_answered_at_once(tokenless, name, req, status, words) -> None:
    evals, url = tokenless
    bodies = {"nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
              "nested 20 deep": json.dumps({**JOB, "frame_overrides": {"x": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}),
              "a huge integer": '{"selection": {"suite": "demo"}, "concurrency": ' + "9" * 5000 + "}",
              "concurrency 400,000": json.dumps({**JOB, "concurrency": 400_000}),
              "max_frames 1e300": json.dumps({**JOB, "frame_overrides": {"max_frames": 1e300}}),
              "temperature NaN": '{"selection": {"benchmarks": ["demo-mc"]}, "sampling": {"temperature": NaN}}'}
    if req is None:
        req = request(url, body=bodies[name].encode())
    req = req.replace(b"Host: H", f"Host: 127.0.0.1:{url.rsplit(':', 1)[1]}".encode())
    started = time.monotonic()
    if status is None:  # a client that sends less than it declared, then stops: the handler gives up, alone
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5) as sock:
            sock.sendall(req)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(65536).split(b" ")[1] == b"400"
    else:
        got, text = raw(url, req)
        answer = json.loads(text)
        assert got == status and words in answer["error"] and "Traceback" not in text, (got, text)
    assert time.monotonic() - started < 5
    assert evals.jobs() == []
    assert client.health(url)["ok"]  # the server is still there for the next request


def test_a_client_that_stalls_is_dropped_without_a_traceback(tokenless, monkeypatch, capfd) -> None:
    evals, url = tokenless
    monkeypatch.setattr(api._Handler, "timeout", 1.0)  # 30 s in service
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as headers, \
            socket.create_connection(("127.0.0.1", port), timeout=10) as body:
        headers.sendall(f"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Ty".encode())  # stops mid-header
        body.sendall(request(url, headers={"Content-Length": "100"}) + b'{"suite": ')  # stops mid-body
        started = time.monotonic()
        assert headers.recv(65536) == b"" and body.recv(65536) == b""  # closed by the server after its timeout
        assert time.monotonic() - started < 5
    assert client.health(url)["ok"] and evals.jobs() == []
    assert "Traceback" not in capfd.readouterr().err


def test_a_bad_include_job_fails_alone(tmp_path: Path) -> None:
    data_map = fault_suite(tmp_path / "data", ["ok"])
    clash, good = tmp_path / "clash", tmp_path / "good"
    clash.mkdir()
    shutil.copy(data_dir("benchmarks") / "mmvu.yaml", clash / "mmvu.yaml")  # a built-in id again
    good.mkdir()
    card = yaml.safe_load((data_dir("benchmarks") / "mmvu.yaml").read_text())
    (good / "my-mmvu.yaml").write_text(yaml.safe_dump({**card, "id": "my-mmvu", "name": "My MMVU"}))
    job = {"frame_overrides": {"max_frames": 4, "max_pixels": 16384}, "sampling": {"max_tokens": 8}}
    selection = {"benchmarks": ["mmvu"], "data_root": str(data_map)}
    with FaultServer() as fake, serving(openai_base(fake.url, tmp_path / "cache"), paths=allowed(tmp_path)) as (evals,
                                                                                                             url):
        def finished(spec: dict) -> dict:
            return client.wait(url, client.submit(url, spec)["id"], poll_s=0.05)

        bad = finished({**job, "selection": {**selection, "include": [str(clash)]},
                        "output_dir": str(tmp_path / "bad")})
        assert bad["status"] == "failed" and "'mmvu' is already used by" in bad["error"], bad
        # The next job, with another folder (so the clashing one is gone, and include folders still work).
        done = finished({**job, "selection": {**selection, "include": [str(good)]},
                         "output_dir": str(tmp_path / "next")})
        assert done["status"] == "done" and done["summary"]["complete"], done
