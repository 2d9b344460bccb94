"""Stop an engine's processes when the process that started them dies, however it dies.

vLLM's engine core runs in child processes that wait on a socket for work. If the front-end process is SIGKILLed
(`kill -9`, the OOM killer), nothing tells them: they would idle forever, holding their memory (on a GPU, the card).
`OrphanGuard` starts a tiny watcher process holding the read end of a pipe from this process. The kernel closes the
pipe when this process dies, whatever the cause, so the watcher wakes up and stops the processes it was given. With
`watch_children`, it also notes every child this process starts from then on (polling /proc twice a second), so an
engine killed *while it starts* (its core spawned, the front end not yet told) is stopped too. A normal shutdown
disarms it first. Linux only (it reads /proc); elsewhere it does nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The watcher: python -c WATCHER PARENT|0 pid:starttime ... ; the start time tells a target from a later process
# given the same pid. With PARENT, new children of PARENT become targets as they appear. Imports only the standard
# library, so it starts in milliseconds.
WATCHER = r"""
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the run, which shuts its engine down itself

def stat(pid):
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()

def started(pid):
    fields = stat(pid)
    return None if fields is None or fields[0] == "Z" else fields[19]

parent, me = int(sys.argv[1]), os.getpid()
targets = dict(a.split(":") for a in sys.argv[2:])
message = b""
while True:
    ready, _, _ = select.select([0], [], [], 0.5 if parent else None)
    if ready:
        chunk = os.read(0, 64)
        if not chunk:
            break  # end of file: the process that armed us is gone
        message += chunk
        *lines, message = message.split(b"\n")
        for line in lines:
            if line == b"disarm":
                sys.exit(0)
            if line.startswith(b"adopt "):  # children the armer listed itself: no polling window to miss them in
                pid, _, start = line[6:].decode().partition(":")
                targets[pid] = start
    elif parent:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != me and entry not in targets:
                fields = stat(int(entry))
                if fields is not None and int(fields[1]) == parent:
                    targets[entry] = fields[19]
for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
    live = [int(pid) for pid, s in targets.items() if started(int(pid)) == s]
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


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first; [1] the parent, [19] the start time)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return None if fields is None else fields[19]


class OrphanGuard:
    """Kills `pids` (and, with `watch_children`, every child this process starts after the guard) if this process
    dies before `disarm()` is called."""

    def __init__(self, pids: set[int] = frozenset(), watch_children: bool = False):
        targets = [f"{pid}:{t}" for pid in sorted(pids) if (t := _start_time(pid)) is not None]
        self._proc = None
        if targets or (watch_children and Path("/proc/self/stat").exists()):
            parent = str(os.getpid()) if watch_children else "0"
            # Its own session: a Ctrl-C or a kill of this process group must not take the watcher first.
            self._proc = subprocess.Popen([sys.executable, "-c", WATCHER, parent, *targets], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def adopt_children(self) -> None:
        """Hand the watcher this process's children now. Before an exit that may come sooner than the watcher's
        next poll (Ctrl-C while an engine starts), so a child spawned in the last half second is stopped too."""
        if self._proc is None:
            return
        me, found = os.getpid(), []
        for entry in os.listdir("/proc"):
            fields = _stat(entry) if entry.isdigit() and int(entry) != self._proc.pid else None
            if fields is not None and int(fields[1]) == me:
                found.append(f"adopt {entry}:{fields[19]}\n")
        try:
            self._proc.stdin.write("".join(found).encode())
            self._proc.stdin.flush()
        except OSError:
            pass

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
