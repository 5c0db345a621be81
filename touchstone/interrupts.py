"""Ctrl-C and SIGTERM end a long command cleanly, in the foreground or not.

A round runs sandboxes from worker threads and training in a subprocess; the
main thread only learns of a signal when Dagster lets it raise, and worker
threads finish their episode first. So the moment a signal arrives, a watcher
thread (woken through `signal.set_wakeup_fd`, which works whatever Python
handler Dagster installs meanwhile) says so in one line and stops this
process's children: bwrap launchers and their sandboxes, the trainer, pytest
runs, and this process's sandbox containers. The main thread then unwinds
normally (Dagster marks the run failed; finished work stays published and
resumable). If it has not ended `GRACE_S` after the signal, the process exits.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

GRACE_S = 30.0
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children first), read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_children(grace_s: float = 2.0) -> None:
    """SIGTERM this process's descendants, SIGKILL those still there after `grace_s`,
    and remove the sandbox containers this process started."""
    pids = descendants(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
    from touchstone.sandbox.docker import remove_own_containers

    remove_own_containers()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child is gone for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class InterruptGuard:
    """While active: SIGINT and SIGTERM (also when SIGINT was ignored, as for a
    background job) print `say(signal name)` once, stop the children, and raise
    KeyboardInterrupt in the main thread. `signum`: the signal received, or None."""

    def __init__(self, say: Callable[[str], None], grace_s: float = GRACE_S):
        self.say, self.grace_s = say, grace_s
        self.signum: int | None = None
        self._saved: dict[int, object] = {}
        self._old_wakeup = -1
        self._reader, self._writer = socket.socketpair()

    @property
    def code(self) -> int:
        """The exit status for the signal received (the shell's 128+N)."""
        return EXIT_CODES.get(self.signum, 1)

    def __enter__(self) -> "InterruptGuard":
        for sig in EXIT_CODES:
            self._saved[sig] = signal.signal(sig, self._raise)
        self._writer.setblocking(False)
        self._old_wakeup = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, daemon=True, name="touchstone-interrupts").start()
        return self

    def __exit__(self, *exc) -> None:
        signal.set_wakeup_fd(self._old_wakeup)
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._writer.close()

    @staticmethod
    def _raise(signum, frame) -> None:
        raise KeyboardInterrupt

    def _watch(self) -> None:
        while True:
            try:
                data = self._reader.recv(64)
            except OSError:
                return
            if not data:  # the guard ended
                self._reader.close()
                return
            signums = [b for b in data if b in EXIT_CODES]
            if signums and self.signum is None:
                self.signum = signums[0]
                self.say(signal.Signals(self.signum).name)
                stop_children()
                threading.Thread(target=self._deadline, daemon=True).start()

    def _deadline(self) -> None:
        time.sleep(self.grace_s)
        sys.stderr.flush()
        os._exit(EXIT_CODES[self.signum])
