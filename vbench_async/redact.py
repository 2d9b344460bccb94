"""Secrets never at rest: one redaction for everything a run, a server job or a site writes down.

A setting is secret when its dataclass field says so (`metadata={"secret": True}`) or its name is one of
`SECRET_NAMES` (an API key, a token). Three things are redacted: a secret field of a settings object (`is_secret`,
for the manifest's copy of the run settings), the value of a secret flag in a command line (`redact_argv`: the
manifest's `command`, the run-directory lock note), and, in any JSON-like value (`scrub`), secret-named keys, every
secret value this process has seen (`remember`: the parsed flags, the server's token, a key read from the
environment) and the password of a URL. The redacted value is a fixed marker, so a reader still sees that a key was
set; an unset one stays null.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

REDACTED = "<redacted>"
SECRET_NAMES: set[str] = {"api_key", "token", "server_token"}
_MIN_LEN = 6  # a shorter value is not replaced inside other text (it would garble it); its flag still is
_seen: set[str] = set()
_PUBLIC_PREFIXES = {"--server"}  # a whole flag of its own, though `--server-token` starts with it
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@\s:]*):[^/@\s]*@", re.IGNORECASE)


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


def _replace_seen(text: str) -> str:
    for value in sorted(_seen, key=len, reverse=True):  # a longer secret first: it may contain a shorter one
        if value in text:
            text = text.replace(value, REDACTED)
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
