"""A client of the evaluation server, standard library only (urllib): what `run --server URL` and a training loop use.

    job = submit("http://127.0.0.1:8765", {"model": "/ckpt/step-500", "suite": "demo"})
    job = wait("http://127.0.0.1:8765", job["id"])   # polls until it is done, failed or cancelled
    job["run_dir"], job["summary"]["benchmarks"]
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError

TOKEN_ENV = "VBENCH_ASYNC_SERVE_TOKEN"
FINISHED = ("done", "failed", "cancelled")


def token_path(port: int) -> Path:
    """Where `serve` on `port` keeps the token it made at start: <home>/serve/port-PORT.token, home being
    $VBENCH_ASYNC_HOME or ~/.cache/vbench-async (a folder only its user may enter, the file only its user may read)."""
    home = os.environ.get("VBENCH_ASYNC_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "vbench-async"
    return base / "serve" / f"port-{int(port)}.token"


def create_token_file(port: int) -> tuple[str, Path]:
    """A new secret for the server on `port`, written where this user's clients find it (mode 0600 in a 0700
    folder); returns (token, file)."""
    token = secrets.token_urlsafe(32)
    path = token_path(port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    path.unlink(missing_ok=True)  # a stale file of an earlier server on this port: never reused
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token, path


def remove_token_file(path: Path, token: str) -> None:
    """Remove the server's token file when it still holds its token (another server may have taken the port)."""
    try:
        if path.read_text(encoding="utf-8").strip() == token:
            path.unlink()
    except OSError:
        pass


def own_server_token(url: str) -> str | None:
    """The token a `serve` of this user made for the loopback server at `url`, or None. Never for another host (the
    token would be sent to it), and only from a file this user owns that no one else may read."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if host not in ("localhost", "::1") and not host.startswith("127."):
        return None
    path = token_path(port)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        return fh.read(4096).decode("utf-8", "replace").strip() or None


def _call(url: str, method: str = "GET", body: dict[str, Any] | None = None, token: str | None = None,
          timeout: float = 30.0) -> dict[str, Any]:
    token = token or os.environ.get(TOKEN_ENV) or own_server_token(url)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise UserError(f"the evaluation server refused {method} {url}: HTTP {exc.code}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"cannot reach the evaluation server at {url}: {reason} (is `vbench-async serve` "
                        "running?)") from None


def submit(server: str, spec: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """Queue a job; returns its record (with "id")."""
    return _call(f"{server.rstrip('/')}/jobs", "POST", spec, token)["job"]


def status(server: str, job_id: str, token: str | None = None) -> dict[str, Any]:
    return _call(f"{server.rstrip('/')}/jobs/{job_id}", token=token)["job"]


def cancel(server: str, job_id: str, token: str | None = None) -> dict[str, Any]:
    return _call(f"{server.rstrip('/')}/jobs/{job_id}/cancel", "POST", {}, token)["job"]


def health(server: str, token: str | None = None) -> dict[str, Any]:
    return _call(f"{server.rstrip('/')}/health", token=token)


def wait(server: str, job_id: str, token: str | None = None, poll_s: float = 1.0,
         on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Poll until the job is finished; `on_progress` sees every record read on the way. Returns the last one."""
    while True:
        job = status(server, job_id, token)
        if on_progress is not None:
            on_progress(job)
        if job["status"] in FINISHED:
            return job
        time.sleep(poll_s)
