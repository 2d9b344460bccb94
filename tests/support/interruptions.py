"""One `vbench-async run` of the demo suite (tiny Qwen2.5-VL, in-process vLLM engine), interrupted three ways in turn,
each time started again with the same command, then let finish. Used by the `qwen25_runs` fixture as its second run,
so the run that must equal the uninterrupted one is also the one that was interrupted; tests/test_resume.py checks
what each step left behind.

  1. SIGKILL of every process of the run while the cold frame cache is being written
  2. Ctrl-C while the engine starts (its core process spawned, vLLM not yet ready)
  3. SIGKILL of the vLLM engine-core process alone, mid-results
  4. the same command, to the end

Each step records facts (exit codes, what `cache verify` said, which processes outlived the run, whether the lines
already on disk were kept); a step that cannot happen (the run ended before its trigger) raises at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from conftest import DEMO_ARGS, REPO, run_cli
from support.processes import command_line, descendants, wait_gone

Files = dict[str, list[bytes]]  # result file name -> its lines


@dataclass
class Step:
    name: str
    exit_code: int | None = None
    lines_before: int = 0  # finished result lines on disk when the step began
    lines_after: int = 0
    kept: bool = True  # every line on disk before the step is still there, unchanged, and no sample has two
    cache_valid: bool | None = None
    stragglers: list[str] = field(default_factory=list)  # processes of the run alive after it ended
    log: str = ""  # the tail of what the run printed
    summary: dict | None = None  # summary.json as the step left it
    seconds: float = 0.0  # from the signal to the end of the run (Ctrl-C)


@dataclass
class Chain:
    out: Path
    steps: dict[str, Step] = field(default_factory=dict)


class Run:
    def __init__(self, out: Path, cache: Path, logs: Path):
        self.out, self.cache, self.logs = out, cache, logs
        self.args = ["run", "--model", "tiny-qwen2.5-vl", *DEMO_ARGS, "--output-dir", str(out),
                     "--cache-dir", str(cache)]
        self.proc: subprocess.Popen | None = None

    def start(self, name: str) -> None:
        self.log_path = self.logs / f"{name}.log"
        with open(self.log_path, "w") as log:  # a file, not a pipe: vLLM logs a lot while nobody reads
            self.proc = subprocess.Popen([sys.executable, "-m", "vbench_async", *self.args], cwd=REPO, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def files(self) -> Files:
        folder = self.out / "results"
        return {f.name: f.read_bytes().splitlines(keepends=True) for f in sorted(folder.glob("*.jsonl"))} \
            if folder.is_dir() else {}

    def wait_until(self, what: str, ready: Callable[[], bool], timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"the run ended (exit {self.proc.returncode}) before {what}:\n"
                                     f"{self.log_path.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.01)

    def engine_core(self) -> int:
        return next((pid for pid in descendants(self.proc.pid) if "EngineCore" in command_line(pid)), 0)

    def engine_core_starting(self) -> int:
        """The engine-core process from its spawn on (it takes the name EngineCore only once vLLM is imported)."""
        return next((pid for pid in descendants(self.proc.pid)
                     if "EngineCore" in command_line(pid) or "multiprocessing.spawn" in command_line(pid)), 0)

    def kill_all(self) -> list[int]:
        """SIGKILL the run and everything it started (a scheduler or the OOM killer taking the whole job)."""
        family = descendants(self.proc.pid)
        os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in family:  # anything that left the process group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        return family

    def finish_step(self, step: Step, before: Files, family: list[int]) -> Files:
        step.exit_code = self.proc.returncode if self.proc is not None else step.exit_code
        step.stragglers = [command_line(p)[:120] for p in wait_gone(family, 60)]
        verify = run_cli("cache", "verify", "--cache-dir", str(self.cache))
        step.cache_valid = verify.returncode == 0
        now = self.files()
        step.kept = kept(before, now)
        step.lines_before, step.lines_after = count(before), count(now)
        step.log = self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
        step.summary = self.summary()
        return now

    def summary(self) -> dict | None:
        path = self.out / "summary.json"
        return json.loads(path.read_text()) if path.exists() else None


def kept(before: Files, now: Files) -> bool:
    """Every file starts with its finished lines of `before` (a torn last line may be cut on the next open), and no
    sample has two lines."""
    for name, lines in before.items():
        whole = [line for line in lines if line.endswith(b"\n")]
        if now.get(name, [])[: len(whole)] != whole:
            return False
    ids = Counter(json.loads(line)["sample_id"] for lines in now.values() for line in lines if line.endswith(b"\n"))
    return all(n == 1 for n in ids.values())


def count(files: Files) -> int:
    return sum(1 for lines in files.values() for line in lines if line.endswith(b"\n"))


def interrupt_and_finish(out: Path, cache: Path, logs: Path) -> Chain:
    logs.mkdir(parents=True, exist_ok=True)
    run, chain = Run(out, cache, logs), Chain(out)
    seen: Files = {}

    step = chain.steps["cache_write"] = Step("cache_write")
    run.start(step.name)
    run.wait_until("a cache write", lambda: any(d.is_dir() for d in cache.glob("vbf1/entries/*")))
    seen = run.finish_step(step, seen, run.kill_all())

    step = chain.steps["ctrl_c"] = Step("ctrl_c")
    run.start(step.name)
    run.wait_until("the engine core to start", lambda: run.engine_core_starting() != 0)
    family = descendants(run.proc.pid)
    os.kill(run.proc.pid, signal.SIGINT)
    started = time.monotonic()
    try:
        run.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        run.kill_all()  # recorded as exit -9: the test says Ctrl-C did not end the run
    step.seconds = time.monotonic() - started
    seen = run.finish_step(step, seen, family)

    step = chain.steps["engine_core"] = Step("engine_core")
    run.start(step.name)
    run.wait_until("the engine core", lambda: run.engine_core() != 0)
    run.wait_until("3 new result lines", lambda: count(run.files()) >= count(seen) + 3)
    family = descendants(run.proc.pid)
    os.kill(run.engine_core(), signal.SIGKILL)
    try:
        run.proc.wait(timeout=300)  # must end by itself, not hang
    except subprocess.TimeoutExpired:
        run.kill_all()
    seen = run.finish_step(step, seen, family)

    step = chain.steps["finish"] = Step("finish")
    proc = run_cli(*run.args)
    step.exit_code = proc.returncode
    now = run.files()
    step.kept, step.lines_before, step.lines_after = kept(seen, now), count(seen), count(now)
    step.cache_valid = run_cli("cache", "verify", "--cache-dir", str(cache)).returncode == 0
    step.log = (proc.stdout + proc.stderr)[-4000:]
    step.summary = run.summary()
    return chain
