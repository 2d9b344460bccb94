"""Crash safety: `vbench-async run` (real vLLM engine, tiny model) SIGKILLed at a random moment, then re-run.

Each trial starts the run on a small suite with a cold frame cache and kills it at one trigger:
  cache_write   while a decode worker writes a cache entry (a temporary file is on disk), else right after one
  first_result  as soon as the first result line is on disk
  mid_results   when half of the result lines are
  delay         after a random delay within the length of an uninterrupted run (start-up, decoding, engine...)
  outputs       while the summary, manifest and site are being written
Odd trials kill the run process alone (`kill -9 PID`: its engine and decode workers must go away on their own);
even trials kill every process of the run at once (a scheduler or the OOM killer taking the whole job).

After the kill, the files left behind must already be sane (`cache verify` accepts the cache; result lines parse,
one per sample), and the same command must finish the run with exactly one result line per sample, the lines of
the killed run untouched, and the same outputs and metrics as an uninterrupted run.

`pytest -m slow tests/test_reliability_crash.py` runs 20 trials (and prints a summary). The default suite's kill tests
are the chain in tests/test_resume.py: a kill during a cache write, Ctrl-C, the engine core killed, a kill of every
process mid-results, then the re-run, against the uninterrupted run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from support.hostile import CARD, run_args, unified_suite
from support.processes import command_line, descendants, wait_gone

pytestmark = pytest.mark.vllm

TRIGGERS = ("cache_write", "first_result", "mid_results", "delay", "outputs")
RUN_TIMEOUT_S = 1200


@dataclass
class Reference:
    data_map: Path
    ids: list[str]
    outputs: dict[str, str]
    metrics: dict
    wall_s: float


@dataclass
class Outcome:
    trial: int
    trigger: str
    whole_tree: bool
    state: str = ""  # what was on disk when the kill landed
    lines_before: int = 0
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verdict = "ok" if not self.problems else "FAILED: " + "; ".join(self.problems)
        how = "all processes" if self.whole_tree else "run process"
        return f"trial {self.trial:2d} {self.trigger:12s} kill {how:13s} at [{self.state}] -> {verdict}"


def _lines(out: Path) -> list[bytes]:
    files = sorted((out / "results").glob("*.jsonl")) if (out / "results").is_dir() else []
    return [line for f in files for line in f.read_bytes().splitlines(keepends=True)]


def _state(out: Path, cache: Path) -> str:
    entries = list(cache.glob("vbf1/entries/*/*.safetensors"))
    temps = list(cache.glob("vbf1/entries/*/.tmp-*"))
    summary = (out / "summary.json").exists() or bool(list(out.glob(".summary.json.*")))
    return f"{len(_lines(out))} lines, {len(entries)} entries, {len(temps)} temp, summary {'yes' if summary else 'no'}"


def _triggered(trigger: str, out: Path, cache: Path, n_total: int, deadline: float) -> bool:
    if trigger == "delay":
        return time.monotonic() >= deadline
    if trigger == "cache_write":  # a writer creates the shard folder, then at once the entry's temporary file
        return any(d.is_dir() for d in cache.glob("vbf1/entries/*"))
    if trigger == "first_result":
        return len(_lines(out)) >= 1
    if trigger == "mid_results":
        return len(_lines(out)) >= n_total // 2
    return (out / "summary.json").exists() or bool(list(out.glob(".summary.json.*")))  # outputs


def _kill(proc: subprocess.Popen, whole_tree: bool) -> list[int]:
    """SIGKILL the run (and, if asked, every process it started); returns the processes that were left running."""
    family = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    if whole_tree:
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait()
    return family


def _check_files(out: Path, cache: Path, ids: list[str], outcome: Outcome, when: str) -> None:
    verify = run_cli("cache", "verify", "--cache-dir", str(cache)) if cache.is_dir() else None
    if verify is not None and verify.returncode != 0:
        outcome.problems.append(f"{when}: cache verify failed: {verify.stdout[-500:]}")
    seen = Counter()
    lines = _lines(out)
    for i, line in enumerate(lines):
        if not line.endswith(b"\n"):
            if i != len(lines) - 1:
                outcome.problems.append(f"{when}: an unterminated line before the end")
            continue  # a torn tail is allowed after a kill (cut on the next open)
        seen[json.loads(line)["sample_id"]] += 1
    if [k for k, v in seen.items() if v > 1]:
        outcome.problems.append(f"{when}: duplicated result lines {[k for k, v in seen.items() if v > 1]}")
    if set(seen) - set(ids):
        outcome.problems.append(f"{when}: unknown sample ids {sorted(set(seen) - set(ids))}")


def run_trial(trial: int, trigger: str, whole_tree: bool, ref: Reference, work: Path, rng: random.Random) -> Outcome:
    outcome = Outcome(trial, trigger, whole_tree)
    out, cache = work / f"trial-{trial}" / "out", work / f"trial-{trial}" / "cache"
    args = [sys.executable, "-m", "vbench_async", *run_args(ref.data_map, out, cache)]
    deadline = time.monotonic() + rng.uniform(0, 0.9 * ref.wall_s)
    log = open(work / f"trial-{trial}.log", "w")  # a file, not a pipe: nobody reads while it runs
    proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        limit = time.monotonic() + RUN_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < limit:
            if _triggered(trigger, out, cache, len(ref.ids), deadline):
                break
            time.sleep(0.002)
        if proc.poll() is not None:
            outcome.state = f"finished before the trigger (exit {proc.returncode})"
        else:
            family = _kill(proc, whole_tree)
            outcome.state = _state(out, cache)
            left = wait_gone(family, 60)
            if left:
                outcome.problems.append(f"left running: {[command_line(p)[:80] for p in left]}")
                for pid in left:
                    os.kill(pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    before = _lines(out)
    outcome.lines_before = sum(1 for line in before if line.endswith(b"\n"))
    _check_files(out, cache, ref.ids, outcome, "after the kill")

    rerun = run_cli(*run_args(ref.data_map, out, cache), timeout=RUN_TIMEOUT_S)
    if rerun.returncode != 0:
        outcome.problems.append(f"re-run exited {rerun.returncode}: {rerun.stderr[-1500:]}")
        return outcome
    _check_files(out, cache, ref.ids, outcome, "after the re-run")
    after = _lines(out)
    if after[: outcome.lines_before] != [line for line in before if line.endswith(b"\n")]:
        outcome.problems.append("the killed run's finished lines changed")
    got = {json.loads(line)["sample_id"]: json.loads(line) for line in after}
    if sorted(got) != sorted(ref.ids) or len(after) != len(ref.ids):
        outcome.problems.append(f"{len(after)} lines for {len(ref.ids)} samples")
    diff = [sid for sid in ref.ids if got.get(sid, {}).get("output") != ref.outputs[sid]]
    if diff:
        outcome.problems.append(f"outputs differ from the uninterrupted run: {diff}")
    metrics = json.loads((out / "summary.json").read_text())["benchmarks"][CARD]
    if metrics != ref.metrics:
        outcome.problems.append(f"metrics differ: {metrics} vs {ref.metrics}")
    return outcome


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    """The uninterrupted run every trial is compared with."""
    work = tmp_path_factory.mktemp("crash")
    data_map = unified_suite(work / "data", n_videos=3, questions_per_video=2)
    t0 = time.monotonic()
    proc = run_cli(*run_args(data_map, work / "ref", work / "ref-cache"), timeout=RUN_TIMEOUT_S)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = {json.loads(line)["sample_id"]: json.loads(line) for line in _lines(work / "ref")}
    metrics = json.loads((work / "ref" / "summary.json").read_text())["benchmarks"][CARD]
    return Reference(data_map, sorted(results), {k: r["output"] for k, r in results.items()}, metrics, wall)


def _trials(reference: Reference, work: Path, n: int, seed: int) -> list[Outcome]:
    rng = random.Random(seed)
    outcomes = []
    for i in range(n):
        outcome = run_trial(i, TRIGGERS[i % len(TRIGGERS)], whole_tree=i % 2 == 0, ref=reference, work=work,
                            rng=rng)
        print(outcome, flush=True)
        outcomes.append(outcome)
    return outcomes


@pytest.mark.slow
def test_twenty_crashes_lose_nothing(reference, tmp_path):
    seed = int(os.environ.get("VBENCH_CRASH_SEED", "20"))
    n = int(os.environ.get("VBENCH_CRASH_TRIALS", "20"))
    outcomes = _trials(reference, tmp_path, n, seed)
    failed = [o for o in outcomes if o.problems]
    kills = sum(1 for o in outcomes if not o.state.startswith("finished"))
    print(f"\nSUMMARY crash trials: {n} run ({kills} killed mid-run), {n - len(failed)} ended with exactly one "
          f"result per sample, the uninterrupted run's outputs and metrics, and a verified cache; "
          f"{len(failed)} failed; {sum(o.lines_before for o in outcomes)} result lines survived the kills untouched")
    assert not failed, "\n".join(map(str, outcomes))
