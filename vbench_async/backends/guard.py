"""Stop an engine's processes when the process that started them dies, however it dies.

vLLM's engine core runs in child processes that wait on a socket for work. If the front-end process is SIGKILLed
(`kill -9`, the OOM killer), nothing tells them: they would idle forever, holding their memory (on a GPU, the card).
`OrphanGuard` starts a tiny watcher process holding the read end of a pipe from this process. The kernel closes the
pipe when this process dies, whatever the cause, so the watcher wakes up and stops the processes it was given. A
normal shutdown disarms it first. Linux only (it reads /proc); elsewhere it does nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The watcher: python -c WATCHER pid:starttime ... ; the start time tells a target from a later process given the
# same pid. Imports only the standard library, so it starts in milliseconds.
WATCHER = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the run, which shuts its engine down itself

def started(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields[19]

targets = [(int(p), s) for p, s in (a.split(":") for a in sys.argv[1:])]
if sys.stdin.buffer.read() == b"disarm\n":
    sys.exit(0)
for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
    live = [pid for pid, s in targets if started(pid) == s]
    for pid in live:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.1)
        live = [pid for pid in live if started(pid) is not None]
"""


def child_pids(parent: int) -> set[int]:
    """Direct children of `parent`, from /proc (empty where there is no /proc)."""
    out = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == parent:
            out.add(int(entry.name))
    return out


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


class OrphanGuard:
    """Kills `pids` if this process dies before `disarm()` is called."""

    def __init__(self, pids: set[int]):
        targets = [f"{pid}:{t}" for pid in sorted(pids) if (t := _start_time(pid)) is not None]
        self._proc = None
        if targets:
            # Its own session: a Ctrl-C or a kill of this process group must not take the watcher first.
            self._proc = subprocess.Popen([sys.executable, "-c", WATCHER, *targets], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def disarm(self) -> None:
        if self._proc is None:
            return
        try:
            self._proc.stdin.write(b"disarm\n")
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._proc = None
