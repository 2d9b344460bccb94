"""The HTTP face of the evaluation server (standard library only: `http.server`), JSON in and out.

    GET  /health              the model, the kept engine, queued and running jobs
    POST /jobs                submit a job (a JobSpec object) -> 202 {"job": ...}
    GET  /jobs                every job the server remembers
    GET  /jobs/ID             one job: status, progress, run directory, summary when finished
    POST /jobs/ID/cancel      cancel it (DELETE /jobs/ID does the same)

Security: the server runs evaluations that read and write files as its user, so it binds to 127.0.0.1 by default.
Bound to any other address it refuses to start without a token, and with a token every request must carry
`Authorization: Bearer TOKEN`. It serves plain HTTP: put TLS in front of it before it leaves a trusted network.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import UserError
from .client import TOKEN_ENV
from .jobs import JobSpec
from .server import EvalServer

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20  # a job is a few hundred bytes


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise UserError(f"refusing to serve on {host} without a token: anyone who reaches it could run evaluations "
                        f"that read and write files as this user. Pass --token (or set ${TOKEN_ENV}), or bind to "
                        "127.0.0.1")


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    # -- plumbing --------------------------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": message})

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong token (Authorization: Bearer TOKEN)")
        return False

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise UserError(f"request body over {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:
            raise UserError(f"the body is not JSON: {exc}") from None

    def _route(self) -> list[str]:
        return [p for p in self.path.split("?", 1)[0].split("/") if p]

    # -- methods ---------------------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authorised():
            return
        evals, parts = self.server.evals, self._route()
        if parts == ["health"]:
            return self._send(HTTPStatus.OK, evals.health())
        if parts == ["jobs"]:
            return self._send(HTTPStatus.OK, {"jobs": [j.to_json() for j in evals.jobs()]})
        if len(parts) == 2 and parts[0] == "jobs":
            job = evals.get(parts[1])
            if job is None:
                return self._error(HTTPStatus.NOT_FOUND, f"no job {parts[1]!r}")
            return self._send(HTTPStatus.OK, {"job": job.to_json()})
        self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        parts = self._route()
        if parts == ["jobs"]:
            try:
                spec = JobSpec.from_json(self._body())
            except UserError as exc:
                return self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return self._send(HTTPStatus.ACCEPTED, {"job": self.server.evals.submit(spec).to_json()})
        if len(parts) == 3 and parts[0] == "jobs" and parts[2] == "cancel":
            self._body()  # read (and ignore) any body, so the connection stays usable
            return self._cancel(parts[1])
        self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path}")

    def do_DELETE(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        parts = self._route()
        if len(parts) == 2 and parts[0] == "jobs":
            return self._cancel(parts[1])
        self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: DELETE {self.path}")

    def _cancel(self, job_id: str) -> None:
        job = self.server.evals.cancel(job_id)
        if job is None:
            return self._error(HTTPStatus.NOT_FOUND, f"no job {job_id!r}")
        self._send(HTTPStatus.OK, {"job": job.to_json()})


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], evals: EvalServer, token: str | None):
        self.evals, self.token = evals, token
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)


def make_http_server(evals: EvalServer, host: str = "127.0.0.1", port: int = 8765,
                     token: str | None = None) -> _HTTPServer:
    """Bind (port 0: any free port; read it from `.server_address`). Serve with `.serve_forever()`."""
    check_binding(host, token)
    try:
        return _HTTPServer((host, port), evals, token)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
