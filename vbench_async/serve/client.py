"""A client of the evaluation server, standard library only (urllib): what `run --server URL` and a training loop use.

    job = submit("http://127.0.0.1:8765", {"model": "/ckpt/step-500", "suite": "demo"})
    job = wait("http://127.0.0.1:8765", job["id"])   # polls until it is done, failed or cancelled
    job["run_dir"], job["summary"]["benchmarks"]
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, Callable

from ..errors import UserError

TOKEN_ENV = "VBENCH_ASYNC_SERVE_TOKEN"
FINISHED = ("done", "failed", "cancelled")


def _call(url: str, method: str = "GET", body: dict[str, Any] | None = None, token: str | None = None,
          timeout: float = 30.0) -> dict[str, Any]:
    token = token or os.environ.get(TOKEN_ENV)
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
