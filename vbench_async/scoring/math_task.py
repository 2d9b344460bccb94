"""Math answers: symbolic equivalence with math-verify, under a time limit that also works off the main thread.

math-verify bounds its own work with SIGALRM, but its alarm raises an ordinary exception that sympy sometimes catches
and carries on (an integral ran for minutes under load), and SIGALRM only exists in the main thread anyway. So every
math-verify check runs in a worker process (`math_worker` as a `worker_process.WorkerProcess`: its own `python -m`,
JSON lines over pipes), with math-verify's
own limit inside it and a hard limit outside: the worker is killed and replaced when a check overruns (scored 0, as
math-verify scores its own timeout). A worker that cannot start or dies raises `MathCheckUnavailable`, which the
pipeline records as the sample's `score_error`: an infrastructure failure is never a wrong answer.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
from functools import lru_cache
from typing import Any

from ..samples import Sample
from ..worker_process import WorkerDied, WorkerProcess, WorkerStartError, WorkerTimedOut, package_env
from . import answer_extraction as extract
from .base import Score, ScorerUnavailable, malformed
from .tasks import first_answer, ground_truth, numbers_match, score_multiple_choice

log = logging.getLogger(__name__)

TIME_LIMIT_S = 5  # per parse and per comparison (math-verify takes whole seconds)

_MATHY = re.compile(r"[\\^_{}=+\-*/\d]")
START_TIMEOUT_S = 60  # the worker's first answer (interpreter start and imports, under load) must come within this


def _parse_math(text: str, whole: bool) -> str | None:
    t = text.strip().strip("$").strip()
    return t or None


_LATEX = re.compile(r"[\\^_{}]")


def _mv_parse(text: str, limit: int):
    """Parse with math-verify. Bare LaTeX (`2\\pi`, `3\\sqrt{2}`, `x^2+1`) is read as LaTeX first: math-verify's
    plain-text reading of `2\\pi` is just its leading number 2, which would make a bare `2` equal to it."""
    from math_verify import parse

    if "$" not in text and _LATEX.search(text):
        parsed = parse(f"${text}$", parsing_timeout=limit)
        if parsed:
            return parsed
    parsed = parse(text, parsing_timeout=limit)
    if not parsed and "$" not in text and _MATHY.search(text):
        parsed = parse(f"${text}$", parsing_timeout=limit)  # bare expressions such as 1+x^2 or 3/4
    return parsed


def check_equivalence(gt: str, pred: str, limit: int = TIME_LIMIT_S) -> tuple[bool, bool]:
    """(pred parsed as math, pred equivalent to gt), with math-verify's own (soft) time limit: call it through
    `equivalent`, which bounds it for sure."""
    from math_verify import verify

    gold = _gold(gt, limit)
    answer = _mv_parse(pred, limit)
    if not any(not isinstance(a, str) for a in answer):  # only a raw-string fallback: not math
        return False, False
    return True, bool(gold) and bool(verify(gold, answer, timeout_seconds=limit))


@lru_cache(maxsize=4096)
def _gold(gt: str, limit: int):
    """A ground truth is parsed once per process (an RL group scores many outputs against it)."""
    return _mv_parse(gt, limit)


class MathCheckUnavailable(ScorerUnavailable):
    """The math-check worker could not start or died: the answer was not checked."""


_worker: WorkerProcess | None = None
_worker_lock = threading.Lock()


def _call(fn: str, args: tuple[Any, ...], timeout: float) -> Any:
    """fn(*args) in the worker, or None when it overran (the worker is then replaced). Calls are serialised."""
    global _worker
    with _worker_lock:
        try:
            if _worker is None:
                _worker = WorkerProcess("vbench_async.scoring.math_worker", package_env(), START_TIMEOUT_S,
                                        what="the math-check worker")
            answer = _worker.request({"fn": fn, "args": list(args)}, timeout)
        except WorkerTimedOut:
            _reset_worker_locked()
            return None
        except (WorkerStartError, WorkerDied) as exc:
            tail = _worker.stderr_tail() if _worker is not None else ""
            _reset_worker_locked()
            raise MathCheckUnavailable(f"{exc}{tail}; the answer was not checked") from exc
    if "error" in answer:
        raise RuntimeError(f"math check failed: {answer['error']}")
    return answer["result"]


def _reset_worker_locked() -> None:
    global _worker
    if _worker is not None:
        _worker.kill()
        _worker = None


def _reset_worker() -> None:
    with _worker_lock:
        _reset_worker_locked()


atexit.register(_reset_worker)


def equivalent(gt: str, pred: str, limit: int = TIME_LIMIT_S) -> tuple[bool, bool, bool]:
    """(parsed, equal, timed_out). Cheap cases (same text, same number) skip math-verify entirely."""
    if extract.normalize_text(gt) == extract.normalize_text(pred) and extract.normalize_text(gt):
        return True, True, False
    g, p = extract.find_numbers(gt), extract.find_numbers(pred)
    plain = all(len(n) == 1 and n[0].text.strip() == s.strip() for n, s in ((g, gt), (p, pred)))
    if plain:
        return True, numbers_match(p[0], g[0]), False
    result = _bounded("equivalence", (gt, pred, limit), limit)
    return (True, False, True) if result is None else (*result, False)


def _bounded(fn: str, args: tuple[Any, ...], limit: int) -> Any:
    """The worker's `fn(*args)`, or None when it overran its hard limit (scored 0 like math-verify's own timeout)."""
    result = _call(fn, args, 3 * limit + 5)
    if result is None:
        log.warning("math check timed out after %ss; scoring 0: %.80r", 3 * limit + 5, args[1])
    return result


def _plain_verify(target: str, gold: str, limit: int) -> bool:
    from math_verify import parse, verify

    try:
        return float(verify(parse(target, parsing_timeout=limit), parse(gold, parsing_timeout=limit),
                            timeout_seconds=limit)) > 0
    except Exception:  # the official script treats any failure here as "not verified"
        return False


def raw_verify(output: str, solution: str, limit: int = TIME_LIMIT_S) -> bool:
    """`verify(parse(output), parse(solution))` on the raw texts, as NVlabs/Long-RL's eval script calls it (the
    output first), bounded like every math-verify check."""
    return bool(_bounded("plain_verify", (output, solution, limit), limit))


def score_math(sample: Sample, output: str) -> Score:
    """Symbolic equivalence of the final expression. Math items with options are scored as multiple choice."""
    if sample.options:
        return score_multiple_choice(sample, output)
    gt = ground_truth(sample, _parse_math, "a math answer")
    found = first_answer(output, _parse_math)
    if found is None:
        return malformed(source=None)
    pred, cand = found
    parsed, equal, timed_out = equivalent(gt, pred)
    if not parsed:
        return Score(0.0, pred, False, {"source": cand.source})
    details = {"source": cand.source} | ({"timeout": True} if timed_out else {})
    return Score(1.0 if equal else 0.0, pred, True, details)
