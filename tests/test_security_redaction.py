"""Redaction is linear and applied where text is written (issue 37): `redact.scrub` on 1 MB hostile inputs in well
under a second (the old URL-password pattern took 19.8 s on 40,000 letters), userinfo of any shape, `Bearer` values,
credential query parameters and remembered keys; result lines, summaries and manifests, log records of any library
(httpx logs each request's URL) and the console never hold them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from vbench_async.redact import REDACTED, remember, scrub, scrub_text

PASSWORD = "pw-planted-3c9e1a"
TOKEN = "tok-planted-8b2d7f"
KEY = "sk-planted-key-4e6a0c"

# Inputs that make a backtracking pattern quadratic: long runs of what a scheme, a user, a key or a header name is
# made of, with the one character that would complete a match missing.
_HOSTILE = {
    "letters": "'a' * 1_000_000",
    "scheme without slashes": "'a' * 999_997 + ':/x'",
    "scheme at the end": "'a' * 999_997 + '://'",
    "colons after a scheme": "'http://' + 'a:' * 500_000",
    "schemes without at": "'http://a' * 125_000",
    "userinfo runs": "'://' + 'a' * 999_990 + ':'",
    "at signs": "'://@' * 250_000",
    "header names": "'api_key:' * 125_000",
    "header without value": "'authorization:' + ' ' * 1_000_000",
    "bearers": "'Bearer ' * 140_000",
    "short bearers": "'bearer bearer1 ' * 66_000",
    "query keys": "'?key=' * 200_000",
    "ampersands": "'&' * 1_000_000",
    "short query names": "'&a' * 500_000",
    "query names without value": "'&a=' * 333_333",
    "bearer and spaces": "'Bearer' + ' ' * 1_000_000",
    "a long query name": "'?' + 'a' * 1_000_000 + '='",
}


def test_scrub_is_linear_on_1mb_inputs() -> None:
    # In a child with a deadline: a quadratic pattern would take hours here (and hold its thread; the server's).
    code = ("import json, sys, time\nfrom vbench_async.redact import scrub\nout = {}\n"
            "for name, expr in json.loads(sys.argv[1]).items():\n"
            "    text = eval(expr)\n"  # the test's own literal expressions, in the child
            # CPU seconds: the machine is shared, and wall time measures the neighbours too
            "    t = time.process_time(); scrub({'message': text, 'n': [text]}); out[name] = time.process_time() - t\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(_HOSTILE)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    times = json.loads(proc.stdout)
    # Two copies of 1 MB each per input: about 0.1 s of CPU here; the old pattern needed 19.8 s for 40,000 letters.
    slow = {name: round(t, 3) for name, t in times.items() if t > 0.5}
    assert not slow, times


def test_scrub_covers_every_shape_of_credential() -> None:
    remember(KEY)
    cases = {
        f"http://alice:{PASSWORD}@127.0.0.1:9/v1": f"http://alice:{REDACTED}@127.0.0.1:9/v1",
        f"http://{TOKEN}@127.0.0.1:9/v1": f"http://{REDACTED}@127.0.0.1:9/v1",
        f"https://:{PASSWORD}@host/v1": f"https://{REDACTED}@host/v1",
        f'HTTP Request: POST http://alice:{PASSWORD}@h/v1/chat/completions "HTTP/1.1 401"':
            f'HTTP Request: POST http://alice:{REDACTED}@h/v1/chat/completions "HTTP/1.1 401"',
        f"Authorization: Bearer {TOKEN}": f"Authorization: Bearer {REDACTED}",
        f'401 {{"error": "invalid key: Bearer {TOKEN}"}}': f'401 {{"error": "invalid key: Bearer {REDACTED}"}}',
        f"https://h/v1?api_key={TOKEN}&x=1": f"https://h/v1?api_key={REDACTED}&x=1",
        f"https://h/v1?a=1&key={TOKEN}#f": f"https://h/v1?a=1&key={REDACTED}#f",
        f"https://h/v1?token={TOKEN}": f"https://h/v1?token={REDACTED}",
        f'{{"api_key": "{TOKEN}"}}': f'{{"api_key": "{REDACTED}"}}',
        f"x-api-key: {TOKEN}": f"x-api-key: {REDACTED}",
        f"the key {KEY} was refused": f"the key {REDACTED} was refused",
    }
    for text, want in cases.items():
        assert scrub_text(text) == want, text
        assert scrub({"m": [text]}) == {"m": [want]}
    for text in ("the bearer of the flag", "the flag Bearer carrying it", "Basic arithmetic",
                 "max_tokens=8 token count", "http://127.0.0.1:8000/v1", "a@b.c"):
        assert scrub_text(text) == text  # ordinary text is left alone


def test_result_lines_summaries_and_manifests_are_scrubbed(tmp_path: Path) -> None:
    from vbench_async.results.result_file import ResultStore
    from vbench_async.results.rundir import write_json

    store = ResultStore(tmp_path, "bench", "c0ffee12")
    line = {"sample_id": "s1", "benchmark": "bench", "config_hash": store.config_hash, "task_type": "multiple_choice",
            "question": "q", "options": ["a", "b"], "answer": "a", "video": None, "fields": {}, "prompt": "p",
            "output": f"see http://{TOKEN}@h/v1", "error": {"kind": "server_error",
                                                           "message": f"HTTP 401: bad key Bearer {TOKEN}"}}
    with store.open():
        store.append(line)
    data = store.path.read_text()
    assert TOKEN not in data and REDACTED in data, data
    assert json.loads(data)["sample_id"] == "s1"
    write_json(tmp_path / "manifest.json", {"backend": {"base_url": f"http://{TOKEN}@127.0.0.1:9/v1"}})
    assert TOKEN not in (tmp_path / "manifest.json").read_text()


def test_log_records_of_any_library_and_the_console_are_scrubbed(tmp_path: Path, capsys) -> None:
    from vbench_async.cli.console import engine_console

    log_path = tmp_path / "logs" / "engine.log"
    httpx_log = logging.getLogger("httpx")
    level = httpx_log.level
    httpx_log.setLevel(logging.INFO)  # vllm.logger, once imported by an earlier test, sets it to WARNING
    with engine_console(log_path, engine_in_process=False):
        httpx_log.info('HTTP Request: POST %s "HTTP/1.1 200 OK"',
                                        f"http://alice:{PASSWORD}@127.0.0.1:9/v1/chat/completions")
        logging.getLogger("vbench_async.backends.openai").warning("server said: Bearer %s", TOKEN)
        try:
            raise RuntimeError(f"cannot reach http://{TOKEN}@127.0.0.1:9/v1")
        except RuntimeError:
            logging.getLogger("vbench_async.evaluation.runner").exception("failed")
    httpx_log.setLevel(level)
    text = log_path.read_text() + "".join(capsys.readouterr())
    assert "HTTP Request: POST" in text and "server said" in text and "RuntimeError" in text, text
    assert PASSWORD not in text and TOKEN not in text, text
