"""The HTTP face of the evaluation server (standard library only: `http.server`), JSON in and out.

    GET  /health              the model, the kept engine, queued and running jobs
    POST /jobs                submit a job (a JobSpec object) -> 202 {"job": ...}
    GET  /jobs                every job the server remembers
    GET  /jobs/ID             one job: status, progress, run directory, summary when finished
    POST /jobs/ID/cancel      cancel it (DELETE /jobs/ID does the same)

Security: the server runs evaluations that read and write files as its user, so it binds to 127.0.0.1 by default.
Bound to any other address it refuses to start without a token, and with a token every request must carry
`Authorization: Bearer TOKEN`. It serves plain HTTP: put TLS in front of it before it leaves a trusted network.
A web page open in a local browser must not reach it either: bodies are JSON only (`Content-Type:
application/json`, which a page cannot send across sites without a preflight this server never grants), the `Host`
header must name the bound address (DNS rebinding), and a request with a foreign `Origin` is refused. Every
malformed request is answered 4xx with a message, and a handler waits at most `TIMEOUT_S` for a slow client.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Collection

from ..errors import UserError
from ..redact import remember, scrub
from .client import TOKEN_ENV
from .jobs import JobSpec
from .paths import PathRefused
from .server import EvalServer

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20  # a job is a few hundred bytes
MAX_DEPTH = 16  # a job nests three levels; json.loads would recurse (and fail) at about a thousand
TIMEOUT_S = 30.0  # seconds a client may take to send its request (a stalled one must not hold a handler thread)


class BadRequest(Exception):
    """A request refused before it reaches the server's work: answered with `status` and `message`."""

    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status, self.message = status, message


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
    timeout = TIMEOUT_S  # socket timeout of each connection (`StreamRequestHandler` applies it)

    # -- plumbing --------------------------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(scrub(body)).encode()  # no key or token leaves in an answer (a job's error may quote one)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status >= 400:  # the request's body may be unread: the connection cannot carry another request
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": message})

    def _handle(self, method: str, route: Any) -> None:
        """Check the request's front door, then route it; every refusal is an answer, never a traceback."""
        self._body_read = False
        try:
            self._check_origin()
            self._check_token()
            self._declared_length()  # a malformed one is a 400 whatever the body's type
            if method == "POST":
                self._json_only()
            route()
        except BadRequest as exc:
            self._drain()
            self._error(exc.status, exc.message)
        except PathRefused as exc:  # a path the server's configuration does not allow
            self._error(HTTPStatus.FORBIDDEN, str(exc))
        except UserError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except OSError as exc:  # the client stalled or left while sending its body
            log.debug("%s: %s", self.address_string(), exc)
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill its handler without an answer
            log.exception("%s %s failed", method, self.path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(exc).__name__}")

    def _drain(self) -> None:
        """Read (and drop) a refused request's body of a valid length, so the client reads the answer: closing a
        socket with unread data resets the connection, and the client may lose what was sent."""
        raw = self.headers.get_all("Content-Length") or []
        length = _digits(raw[0]) if len(raw) == 1 else None
        if self._body_read or length is None or length > MAX_BODY:
            return
        try:
            self.rfile.read(length)
        except OSError:
            pass
        self._body_read = True

    def _check_origin(self) -> None:
        host = self.headers.get_all("Host") or []
        if len(host) == 1 and _split_host(host[0].strip().lower())[1] == -1:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"Host {host[0]!r:.200} has a port that is not a number")
        if len(host) != 1 or not self.server.host_allowed(host[0]):
            raise BadRequest(HTTPStatus.FORBIDDEN, f"Host {host[0] if host else '(none)'!r:.200} is not this "
                                                   f"server's address ({self.server.own_host}); requests must name it")
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.server.allowed_origins:
            raise BadRequest(HTTPStatus.FORBIDDEN, f"requests from web pages ({origin}) are refused; "
                                                   "submit jobs with `vbench-async run --server` or the client library")

    def _check_token(self) -> None:
        token = self.server.token
        if not token:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise BadRequest(HTTPStatus.UNAUTHORIZED, "missing or wrong token (Authorization: Bearer TOKEN)")

    def _json_only(self) -> None:
        kind = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise BadRequest(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                             f"request bodies are JSON: send Content-Type: application/json (got {kind or 'none'!r})")

    def _declared_length(self) -> int:
        """The request's Content-Length (0 without one): one number of ASCII digits, else 400."""
        raw = self.headers.get_all("Content-Length") or []
        length = _digits(raw[0]) if len(raw) == 1 else 0 if not raw else None
        if length is None:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"Content-Length must be one non-negative integer, got "
                                                     f"{', '.join(raw)!r:.200}")
        return length

    def _body(self) -> Any:
        """The request's JSON body ({} when it has none), read within its declared length and the caps."""
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "send the body with a Content-Length, not chunked")
        length = self._declared_length()
        if length > MAX_BODY:
            raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY} bytes")
        data = self.rfile.read(length) if length else b""
        self._body_read = True
        if len(data) < length:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body ended after {len(data)} of {length} bytes")
        try:
            body = json.loads(data or b"{}")
        except RecursionError:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body nests deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}") from None
        if _depth(body) > MAX_DEPTH:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body nests deeper than {MAX_DEPTH} levels")
        return body

    def _route(self) -> list[str]:
        return [p for p in self.path.split("?", 1)[0].split("/") if p]

    # -- methods ---------------------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET", self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST", self._post)

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE", self._delete)

    def _get(self) -> None:
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

    def _post(self) -> None:
        parts = self._route()
        body = self._body()  # read first, whatever the endpoint, so the connection stays usable
        if parts == ["jobs"]:
            spec = JobSpec.from_json(body)
            return self._send(HTTPStatus.ACCEPTED, {"job": self.server.evals.submit(spec).to_json()})
        if len(parts) == 3 and parts[0] == "jobs" and parts[2] == "cancel":
            return self._cancel(parts[1])
        self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path}")

    def _delete(self) -> None:
        parts = self._route()
        if len(parts) == 2 and parts[0] == "jobs":
            return self._cancel(parts[1])
        self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: DELETE {self.path}")

    def _cancel(self, job_id: str) -> None:
        job = self.server.evals.cancel(job_id)
        if job is None:
            return self._error(HTTPStatus.NOT_FOUND, f"no job {job_id!r}")
        self._send(HTTPStatus.OK, {"job": job.to_json()})


def _digits(value: str) -> int | None:
    """A header's non-negative integer, ASCII digits only (`str.isdigit` takes "²", which `int` refuses); None for
    anything else. Beyond 18 digits it is only "too large" (never parsed: `int` refuses 4,300 digits)."""
    value = value.strip(" \t")
    if not value or not value.isascii() or not value.isdigit():
        return None
    return int(value) if len(value) <= 18 else 1 << 62


def _depth(obj: Any) -> int:
    """How deeply lists and objects nest in a parsed body (iterative: the body is untrusted)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], evals: EvalServer, token: str | None,
                 allowed_hosts: Collection[str] = (), allowed_origins: Collection[str] = ()):
        self.evals, self.token = evals, token
        self.allowed_origins = {o.rstrip("/") for o in allowed_origins}
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        host, self.port = address[0], self.server_address[1]
        self.own_host = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        names = {host.lower(), *(h.lower() for h in allowed_hosts)}
        if is_loopback(host):  # "localhost" reaches a loopback socket too (and a "localhost" one by either address)
            names |= {"localhost", "127.0.0.1", "::1"} if host == "localhost" else {"localhost"}
        self._wildcard = host in ("", "0.0.0.0", "::")  # any name may reach it: the required token guards it
        self._names = names

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that stalled past the timeout or left mid-request: nothing to answer, and no traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("%s: %s: %s", client_address, type(exc).__name__, exc)
            return
        log.error("request from %s failed", client_address, exc_info=exc)

    def host_allowed(self, header: str) -> bool:
        """Whether a request's Host header names this server (its address or an allowed name, and its port)."""
        if self._wildcard:
            return True
        name, port = _split_host(header.strip().lower())
        return name in self._names and port in (None, self.port)


def _split_host(header: str) -> tuple[str, int | None]:
    """`name:port`, `[v6]:port` or a bare name -> (name, port); a port that is not a number gives -1."""
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port = rest.removeprefix(":") or None
    else:
        name, _, port = header.rpartition(":") if header.count(":") == 1 else (header, "", "")
        port = port or None
    if port is None:
        return name, None
    number = _digits(port) if port.strip(" \t") == port else None
    return name, number if number is not None else -1


def make_http_server(evals: EvalServer, host: str = "127.0.0.1", port: int = 8765,
                     token: str | None = None, allowed_hosts: Collection[str] = (),
                     allowed_origins: Collection[str] = ()) -> _HTTPServer:
    """Bind (port 0: any free port; read it from `.server_address`). Serve with `.serve_forever()`.
    `allowed_hosts`: other names clients reach it by (a reverse proxy's); `allowed_origins`: web pages that may call
    it (none by default)."""
    check_binding(host, token)
    remember(token)  # a job's manifest records the server's command line: never with the token
    try:
        return _HTTPServer((host, port), evals, token, allowed_hosts, allowed_origins)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
