"""No rank waits on a dead peer: heartbeats and a failure notice through the launcher's TCP store.

A rank blocked in a collective cannot notice that its peer is gone: the collective waits for `fsdp.timeout_s`
(30 minutes by default, because ranks legitimately wait for each other's rollouts). A daemon thread on every rank
therefore, every few seconds and independently of the main thread,
  - adds 1 to its own heartbeat counter in the store;
  - ends this process (exit status 1, with a message naming the peer) when a peer has posted a failure notice, or
    when a peer's counter has not moved for `fsdp.peer_timeout_s` (the peer was killed, or is frozen);
and a rank whose training raises posts the notice (`report_failure`) before it exits.
The store is the one torchrun hosts (MASTER_ADDR:MASTER_PORT); a store that stops answering (node 0 died) counts as
a failure too. Collectives that mismatch while every rank is alive are still the collective timeout's job.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from datetime import timedelta
from typing import Sequence

import torch.distributed as dist

log = logging.getLogger(__name__)

_PREFIX = "vbench-train/"
_FAILED = _PREFIX + "failed"
_active: PeerWatch | None = None


def _alive(rank: int) -> str:
    return f"{_PREFIX}alive/{rank}"


def _done(rank: int) -> str:
    return f"{_PREFIX}done/{rank}"


class PeerWatch:
    def __init__(self, rank: int, world: int, timeout_s: float):
        self.rank, self.world, self.timeout_s = rank, world, timeout_s
        self.interval_s = max(0.5, min(5.0, timeout_s / 8))
        self.store_timeout_s = max(10.0, timeout_s / 2)
        # A client of its own: the main thread's store calls never queue behind the watch, nor the reverse.
        self.store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                                   timeout=timedelta(seconds=self.store_timeout_s), wait_for_workers=False)
        self._stop = threading.Event()
        self._last: dict[int, tuple[int, float]] = {}
        self.store.add(_alive(rank), 1)
        self._thread = threading.Thread(target=self._run, name="vbench-peer-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                problem = self._check()
            except Exception as exc:  # the store is gone: node 0 (which hosts it) died
                problem = f"the rendezvous store stopped answering ({type(exc).__name__}: {exc})"
            if problem and not self._stop.is_set():
                _die(f"rank {self.rank} stops: {problem}")

    def _check(self) -> str | None:
        self.store.add(_alive(self.rank), 1)
        if self.store.check([_FAILED]):
            who, _, message = self.store.get(_FAILED).decode(errors="replace").partition("\n")
            if who != str(self.rank):  # the failing rank itself is already on its way out, with its traceback
                return message
        now = time.monotonic()
        for peer in range(self.world):
            if peer == self.rank or self.store.check([_done(peer)]):
                continue
            count = self.store.add(_alive(peer), 0)  # reads without changing it (and never blocks)
            last_count, since = self._last.get(peer, (count, now))
            if count != last_count:
                since = now
            self._last[peer] = (count, since)
            if now - since > self.timeout_s:
                return (f"rank {peer} has shown no sign of life for {now - since:.0f} s (killed, or frozen); "
                        f"fsdp.peer_timeout_s is {self.timeout_s:g}")
        return None

    def report(self, message: str) -> None:
        """Tell every peer that this rank failed (they stop within one interval)."""
        try:
            if not self.store.check([_FAILED]):
                self.store.set(_FAILED, f"{self.rank}\nrank {self.rank} failed: {message}")
        except Exception:  # the store is gone too: the peers notice that on their own
            pass

    def close(self, finished: bool) -> None:
        if finished:
            try:
                self.store.set(_done(self.rank), "1")  # peers tearing down later must not wait for this one
            except Exception:
                pass
        self._stop.set()
        # Joined, not left to die with the interpreter: a daemon thread that comes back from a store call (C++,
        # GIL released) during finalization is ended by pthread_exit, whose unwinding through pybind11's noexcept
        # frames aborts the process ("terminate called without an active exception") after a run that succeeded.
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval_s + self.store_timeout_s)


def _die(message: str) -> None:
    log.error("%s", message)
    print(f"vbench-async train: error: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)  # the main thread may sit in a collective that would wait for its full timeout


def start_watch(rank: int, world: int, timeout_s: float) -> PeerWatch | None:
    """Start this rank's watch (nothing to watch in a world of one)."""
    global _active
    if world > 1 and _active is None:
        try:
            _active = PeerWatch(rank, world, timeout_s)
            atexit.register(stop_watch, finished=False)  # whatever way the rank leaves, the thread ends first
        except (RuntimeError, KeyError, ValueError) as exc:  # a launcher without a reachable MASTER_ADDR store
            log.warning("no peer watch (%s): a dead peer is noticed only when a collective times out", exc)
    return _active


def report_failure(exc: BaseException) -> None:
    if _active is not None:
        _active.report(f"{type(exc).__name__}: {exc}"[:2000])


def stop_watch(finished: bool) -> None:
    global _active
    if _active is not None:
        _active.close(finished)
        _active = None


def signal_done(name: str) -> None:
    """Rank 0: the work the other ranks wait for in `wait_for(name)` is done."""
    if _active is not None:
        _active.store.set(f"{_PREFIX}event/{name}", "1")


def wait_for(name: str, timeout_s: float) -> None:
    """Other ranks: wait for rank 0's `signal_done(name)` by polling the store (no collective, so no collective
    timeout applies; the watch still ends this rank if rank 0 dies meanwhile)."""
    if _active is None:
        return
    deadline = time.monotonic() + timeout_s
    while not _active.store.check([f"{_PREFIX}event/{name}"]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 did not finish {name} within {timeout_s:g} s")
        time.sleep(1.0)


def _post_key(name: str, rank: int) -> str:
    return f"{_PREFIX}post/{name}/{rank}"


def broadcast_text(text: str, src: int = 0) -> str:
    """Rank `src`'s `text` on every rank, sent as UTF-8 bytes in tensors: object collectives pickle, this does not."""
    import torch

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    mine = text.encode() if dist.get_rank() == src else b""
    size = torch.tensor([len(mine)], dtype=torch.int64, device=device)
    dist.broadcast(size, src=src)
    data = (torch.frombuffer(bytearray(mine), dtype=torch.uint8).to(device) if mine
            else torch.empty(int(size.item()), dtype=torch.uint8, device=device))
    dist.broadcast(data, src=src)
    return data.cpu().numpy().tobytes().decode()


def exchange(name: str, value: str, timeout_s: float | None = None, ranks: Sequence[int] | None = None,
             poll_s: float = 0.5) -> list[str] | None:
    """Post this rank's `value` under `name` and return the values of `ranks` (default: every rank), in rank order,
    by waiting on the store: no collective, so a long wait (one rank still preparing or validating) trips no
    collective timeout, and the watch still ends this rank if a peer dies meanwhile. None without a watch (a world of
    one, or no reachable store)."""
    if _active is None:
        return None
    keys = [_post_key(name, rank) for rank in (range(_active.world) if ranks is None else ranks)]
    _active.store.set(_post_key(name, _active.rank), value)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    delay = poll_s
    while not _active.store.check(keys):  # one call for all keys: O(world) per rank, not per peer
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"the other ranks did not post {name} within {timeout_s:g} s")
        time.sleep(delay)
        delay = min(delay * 1.5, max(poll_s, 0.5))  # quick when the peers are close behind, light on a long wait
    return [_active.store.get(key).decode() for key in keys]


def post(name: str, value: str) -> None:
    """Post this rank's `value` under `name` without waiting for anyone (peers read it in their `exchange`)."""
    if _active is not None:
        _active.store.set(_post_key(name, _active.rank), value)


def forget(name: str) -> None:
    """Delete this rank's post under `name` (once every peer has read it): a long run leaves no trail in the store."""
    if _active is not None:
        _active.store.delete_key(_post_key(name, _active.rank))


def gather(name: str, timeout_s: float) -> bool:
    """Every rank: mark that this rank reached `name`, then wait until all ranks have (`exchange`). False when
    `timeout_s` passes first; True at once without a watch (a world of one)."""
    try:
        exchange(name, "1", timeout_s)
    except TimeoutError:
        return False
    return True
