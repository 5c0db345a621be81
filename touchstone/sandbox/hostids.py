"""Host user ids for sandboxes, one per sandbox (or per group of sandboxes that
must share files, like the two of an isolated grading run).

Why: the kernel counts some budgets per host user, across every namespace: POSIX
message queue bytes (RLIMIT_MSGQUEUE), pending signals, inotify instances and
watches, processes (RLIMIT_NPROC). Sandboxes that ran as one host user shared
them, so one could use a budget up and make a call fail in another running at
the same time. Each sandbox now runs as a host uid of its own, which owns
nothing on the host and no other process uses while the sandbox lives.

Only a root harness can hand out uids (a normal user's sandboxes run as that
user). Across harness processes on the machine, a uid is taken by holding an
exclusive lock on a file named after it under LOCK_DIR; the lock goes with the
process that holds it, so a killed harness frees its uids. (Harnesses with
different TMPDIRs on one machine do not see each other's locks; each starts at
a random uid, so they rarely meet.)"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import tempfile
from pathlib import Path

from touchstone.sandbox.errors import SandboxError

# Outside the ranges distributions hand to people (1000-59999) and the subuid
# ranges they hand to user namespaces (100000 + 65536 per user, for the first users).
BASE = 910_000
COUNT = 65_536
# Under TMPDIR: the one folder a deployment shares, at the same path, between the
# host (where the Docker daemon resolves the account files' bind mounts) and
# every step container that opens sandboxes (where the locks must be seen).
LOCK_DIR = Path(tempfile.gettempdir()) / "touchstone-host-uids"


class HostUser:
    """One host uid (and the gid of the same number) held for as long as the
    object is open; `close()` (or the end of a `with`) gives it back."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = self.gid = uid
        self._lock_fd: int | None = lock_fd

    @classmethod
    def acquire(cls) -> HostUser:
        """A uid of [BASE, BASE + COUNT) that no live sandbox on this machine holds."""
        LOCK_DIR.mkdir(mode=0o755, exist_ok=True)
        start = random.randrange(COUNT)  # few collisions between harnesses that start together
        for step in range(COUNT):
            uid = BASE + (start + step) % COUNT
            fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return cls(uid, fd)
        raise SandboxError(f"all {COUNT} sandbox host uids from {BASE} are in use on this machine")

    def account_files(self, etc: Path) -> dict[str, Path]:
        """`passwd` and `group` of the root filesystem's `etc`, with the user and
        group `agent` at this uid, written under LOCK_DIR (a path that tells the
        sandbox nothing it does not know) for a container to bind over its own."""
        folder = LOCK_DIR / f"accounts-{self.uid}"
        folder.mkdir(mode=0o755, exist_ok=True)
        files = {}
        for name, ids in (("passwd", [str(self.uid), str(self.gid)]), ("group", [str(self.gid)])):
            lines = []
            for line in (etc / name).read_text().splitlines():
                fields = line.split(":")
                if fields[0] == "agent":
                    fields[2 : 2 + len(ids)] = ids
                lines.append(":".join(fields))
            files[name] = folder / name
            files[name].write_text("\n".join(lines) + "\n")
            files[name].chmod(0o644)
        return files

    def close(self) -> None:
        if self._lock_fd is not None:
            shutil.rmtree(LOCK_DIR / f"accounts-{self.uid}", ignore_errors=True)  # while still ours
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    def __enter__(self) -> HostUser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
