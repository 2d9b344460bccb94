"""Secrets never at rest: one redaction for everything a run, a server job or a site writes down.

A setting is secret when its dataclass field says so (`metadata={"secret": True}`) or its name is one of
`SECRET_NAMES` (an API key, a token). Three things are redacted: a secret field of a settings object (`is_secret`,
for the manifest's copy of the run settings), the value of a secret flag in a command line (`redact_argv`: the
manifest's `command`, the run-directory lock note), and, in any JSON-like value (`scrub`), secret-named keys, every
secret value this process has seen (`remember`: the parsed flags, the server's token, a key read from the
environment) and, in text (`scrub_text`), URL userinfo of any shape, `Authorization`/`Bearer` values, credential
query parameters and secret-named `key: value` pairs, in linear time. The redacted value is a fixed marker, so a
reader still sees that a key was set; an unset one stays null. It is applied where text is written: result lines,
summary.json and manifest.json (`rundir.write_json`), every log handler the project installs (`ScrubbingFormatter`,
so third-party records are scrubbed too), the console's start-up line and failure list, the site, the server's
answers.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Mapping, Sequence

REDACTED = "<redacted>"
SECRET_NAMES: set[str] = {"api_key", "token", "server_token"}
_MIN_LEN = 6  # a shorter value is not replaced inside other text (it would garble it); its flag still is
_seen: set[str] = set()
_PUBLIC_PREFIXES = {"--server"}  # a whole flag of its own, though `--server-token` starts with it

# Patterns of secrets in free text. Each is linear: a match can only start at a literal (`://`, a name, `?`/`&`),
# what follows is character classes with bounded or non-overlapping runs, so nothing backtracks more than the one
# run it scanned (tests/test_security_redaction.py times them on 1 MB inputs).
# A URL's userinfo, of any shape (`TOKEN@`, `user:pass@`, `:pass@`): the run after `://` up to an `@`, with no `/`,
# `@`, whitespace or quote in it (a run stops at the next `://`'s slash, so runs never overlap).
_USERINFO = re.compile(r"://([^/@\s\"'<>]+)@")
# `Authorization: Bearer X`, `"api_key": "X"`, `X-Api-Key=X`: a secret header or key and its value.
_NAMED = re.compile(r"(?<![A-Za-z0-9_])(authorization|proxy-authorization|x-api-key|api[_-]?key|apikey"
                    r"|access[_-]?token|client[_-]?secret)([\"']?[ \t]{0,16}[:=][ \t]{0,16}[\"']?)"
                    r"((?:bearer|basic|token)[ \t]{1,16})?([^\s\"'&,;]+)", re.IGNORECASE)
# `Bearer X` / `Basic X` wherever it appears (a server's error repeating the header it was sent); X must look like a
# credential (a digit in it, or 20 characters), so prose ("the flag Bearer carrying it") is left alone.
_BEARER = re.compile(r"(?<![A-Za-z0-9_])(Bearer|BEARER|bearer|Basic|BASIC)([ \t]{1,16})([A-Za-z0-9._~+/=-]{8,})")
# A query parameter that carries a credential (`?key=X`, `&token=X`, `;api_key=X`): any short name, kept when it is
# not one of these (one bounded run per `?`/`&`, not one try per name).
_QUERY = re.compile(r"([?&;]([A-Za-z_-]{1,24})=)([^&\s\"'#<>]+)")
_QUERY_NAMES = {"api_key", "api-key", "apikey", "key", "token", "access_token", "access-token", "auth", "password",
                "passwd", "secret", "sig", "signature"}


def mark_secret(name: str) -> None:
    """Treat settings (and flags) called `name` as secret from now on (a field marked `{"secret": True}`)."""
    SECRET_NAMES.add(name)


def is_secret(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("secret")) or f.name in SECRET_NAMES


def remember(*values: Any) -> None:
    """Values to replace wherever they appear in what `scrub` is given (strings only; None and empty are ignored)."""
    _seen.update(v for v in values if isinstance(v, str) and len(v) >= _MIN_LEN)


def remember_named(values: Mapping[str, Any]) -> None:
    """Remember the secret-named entries of `values` (a command's parsed flags)."""
    remember(*(v for k, v in values.items() if _secret_key(k)))


def _flags() -> set[str]:
    return {"--" + name.replace("_", "-") for name in SECRET_NAMES}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of every secret flag replaced: `--api-key K`, `--api-key=K`, and argparse's unambiguous
    abbreviations of them (`--api-k K`); any remembered secret value elsewhere is replaced too."""
    flags = _flags()
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if name.startswith("--") and _names_secret(name, flags):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(_replace_seen(arg))
    return out


def _names_secret(option: str, flags: set[str]) -> bool:
    # An exact secret flag, or a prefix that only secret flags start with (argparse accepts those abbreviations);
    # `--server` itself is a flag of its own, and a prefix of `--server-token`.
    if option in flags:
        return True
    return len(option) > 4 and option not in _PUBLIC_PREFIXES and any(f.startswith(option) for f in flags)


def scrub(obj: Any) -> Any:
    """A copy of JSON-like `obj` with every secret-named key's value, every remembered secret value and every URL
    password replaced."""
    if isinstance(obj, dict):
        return {k: REDACTED if _secret_key(k) and isinstance(v, str) else scrub(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj]
    if isinstance(obj, str):
        return _replace_seen(obj)
    return obj


def _secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_NAMES


def scrub_text(text: str) -> str:
    """`text` with every remembered secret value, URL userinfo (any shape), `Authorization`/`Bearer` value, secret
    query parameter (`api_key=`, `key=`, `token=`) and secret-named `key: value` replaced. Linear in `len(text)`."""
    return _replace_seen(text)


def _replace_seen(text: str) -> str:
    for value in sorted(_seen, key=len, reverse=True):  # a longer secret first: it may contain a shorter one
        if value in text:
            text = text.replace(value, REDACTED)
    if "://" in text:
        text = _USERINFO.sub(_userinfo, text)
    text = _NAMED.sub(lambda m: f"{m[1]}{m[2]}{m[3] or ''}{REDACTED}", text)
    text = _BEARER.sub(_bearer, text)
    if "=" in text:
        text = _QUERY.sub(lambda m: f"{m[1]}{REDACTED}" if m[2].lower() in _QUERY_NAMES else m[0], text)
    return text


def _bearer(m: re.Match[str]) -> str:
    value = m[3]
    if len(value) < 20 and not any(c.isdigit() for c in value):
        return m[0]
    return f"{m[1]}{m[2]}{REDACTED}"


def _userinfo(m: re.Match[str]) -> str:
    info = m[1]
    if not info or info == REDACTED:
        return m[0]
    user, colon, _ = info.partition(":")
    return f"://{user}:{REDACTED}@" if colon and user else f"://{REDACTED}@"


class ScrubbingFormatter(logging.Formatter):
    """A log formatter whose every line (message, arguments and traceback alike) is scrubbed: set on each handler
    this package installs, so a library's record (httpx logs each request's URL) is scrubbed too."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub_text(super().format(record))


def scrub_handlers(*handlers: logging.Handler) -> None:
    """Make each handler's output scrubbed, keeping its format (a handler without a formatter gets the default one)."""
    for handler in handlers:
        fmt = handler.formatter
        if isinstance(fmt, ScrubbingFormatter):
            continue
        scrubbing = ScrubbingFormatter()
        if fmt is not None:
            scrubbing.__dict__.update(fmt.__dict__)
        handler.setFormatter(scrubbing)
