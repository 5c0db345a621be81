"""One writer per data root: a lock every entry point that writes a round takes
(`touchstone round run`, and every Dagster run through the storage resource:
the UI, the schedule, the sensor, a deployment).

The lock names its holder (pid, host, command, start time, Dagster run), so a
second writer is refused with a message that says who is writing, or waits for
it (`wait=True`). A holder that died without releasing is detected and its lock
taken over:

- a local root: `ROOT/.writer.lock`, held with `flock`. The kernel releases it
  when the holding process dies (SIGKILL included), so a stale lock is a file
  whose previous holder no longer holds the flock; its record is reported.
- an S3 root: the object `ROOT/.writer.lock`, created with a conditional put
  (`If-None-Match: *`) and renewed every `HEARTBEAT_S` with `If-Match` on its
  ETag. It is stale when the store's own clock says it was not renewed for
  `STALE_AFTER_S`, or when its holder ran on this host and is gone; it is then
  taken over with `If-Match` on the stale ETag, so of two takers only one wins.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from touchstone.sandbox.reaper import owner_alive, owner_token

LOCK_NAME = ".writer.lock"
HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0
# Set by a process that holds the lock for its children and its in-process Dagster runs:
# they write as part of the holder's work, not as a second writer.
TOKEN_ENV = "TOUCHSTONE_WRITER_TOKEN"


class Holder(BaseModel):
    """Who writes a data root."""

    token: str  # unique per acquisition: "<pid>:<process start time>:<host>"
    pid: int
    host: str
    command: str
    started_at: str  # ISO 8601, UTC
    run_id: str | None = None  # the Dagster run, when the holder is one

    def describe(self) -> str:
        run = f", Dagster run {self.run_id}" if self.run_id else ""
        return f"pid {self.pid} on {self.host} since {self.started_at} (`{self.command}`{run})"

    def alive_here(self) -> bool | None:
        """Whether the holder still runs: known only on its own host (None elsewhere)."""
        if self.host != socket.gethostname():
            return None
        return owner_alive(self.token.rsplit(":", 1)[0])


class DataRootBusy(RuntimeError):
    """Another writer holds the data root."""

    def __init__(self, root: str, holder: Holder | None):
        self.root, self.holder = root, holder
        who = holder.describe() if holder else "another process (its record is being written)"
        super().__init__(
            f"data root {root} is being written by {who}; wait for it to finish, pass --wait to queue behind it, "
            "or stop that process"
        )


def this_process(run_id: str | None = None) -> Holder:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else sys.executable
    return Holder(
        token=f"{owner_token()}:{socket.gethostname()}",
        pid=os.getpid(),
        host=socket.gethostname(),
        command=command[:400],
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        run_id=run_id,
    )


class WriterLock:
    """The data root's writer lock. `root`: a local path or an s3:// URL; `fs`: the
    store's filesystem for an object-store root (its credentials and endpoint)."""

    def __init__(self, root: str, fs: Any = None, run_id: str | None = None):
        self.root = str(root).rstrip("/")
        self.me = this_process(run_id)
        self.took_over: Holder | None = None  # the stale holder this acquisition replaced
        self._backend = _S3Lock(self.root, fs) if fs is not None else _LocalLock(Path(self.root))

    def holder(self) -> Holder | None:
        """The latest holder's record (it may be gone: see `busy`)."""
        return self._backend.holder()

    def busy(self) -> Holder | None:
        """The live holder, or None when the root is free to write (or its holder is gone)."""
        return self._backend.busy()

    def acquire(self, wait: bool = False, poll_s: float = 1.0, on_wait=None) -> "WriterLock":
        """Take the lock, or raise DataRootBusy (wait=False); wait=True polls until it is free,
        calling `on_wait(holder)` once."""
        told = False
        while True:
            try:
                self.took_over = self._backend.try_acquire(self.me)
                return self
            except DataRootBusy as busy:
                if not wait:
                    raise DataRootBusy(self.root, busy.holder) from None
                if on_wait and not told:
                    on_wait(busy.holder)
                    told = True
                time.sleep(poll_s)

    def release(self) -> None:
        self._backend.release()

    def __enter__(self) -> "WriterLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class _LocalLock:
    def __init__(self, root: Path):
        self.path = root / LOCK_NAME
        self._fd: int | None = None

    def holder(self) -> Holder | None:
        try:
            text = self.path.read_text()
            return Holder.model_validate_json(text) if text.strip() else None
        except (OSError, ValueError):  # none, or a record cut short by its writer's death
            return None

    def try_acquire(self, me: Holder) -> Holder | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataRootBusy(str(self.path.parent), self._holder_soon()) from None
        stale = self.holder()  # a record left behind: its writer died without releasing
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.model_dump_json().encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return stale

    def busy(self) -> Holder | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._holder_soon() or Holder(
                token="?", pid=0, host="unknown", command="unknown", started_at="unknown"
            )
        finally:
            os.close(fd)  # also drops the shared lock
        return None

    def _holder_soon(self) -> Holder | None:
        """The holder's record; a moment after it took the flock, it is written."""
        for _ in range(20):
            if found := self.holder():
                return found
            time.sleep(0.05)
        return None

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # empty: released cleanly, nothing stale to report
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


class _S3Lock:
    def __init__(self, root: str, fs: Any):
        self.fs = fs
        bucket, _, prefix = root.split("://", 1)[1].partition("/")
        self.bucket, self.key = bucket, f"{prefix}/{LOCK_NAME}" if prefix else LOCK_NAME
        self._etag: str | None = None
        self._me: Holder | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _head(self) -> tuple[Holder | None, str, float] | None:
        """(holder, ETag, seconds since it was last written by the store's clock), or None."""
        try:
            head = self.fs.call_s3("head_object", Bucket=self.bucket, Key=self.key)
        except FileNotFoundError:
            return None
        record = head.get("Metadata", {}).get("holder")
        server_now = parsedate_to_datetime(head["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (server_now - head["LastModified"]).total_seconds()
        return (Holder.model_validate_json(record) if record else None), head["ETag"], age

    def holder(self) -> Holder | None:
        found = self._head()
        return found[0] if found else None

    def busy(self) -> Holder | None:
        found = self._head()
        if found is None:
            return None
        holder, _, age = found
        return None if age > STALE_AFTER_S or (holder and holder.alive_here() is False) else holder

    def _put(self, me: Holder, **condition: str) -> str:
        record = json.dumps(me.model_dump(), ensure_ascii=True)
        body = record.encode()
        reply = self.fs.call_s3(
            "put_object", Bucket=self.bucket, Key=self.key, Body=body, Metadata={"holder": record}, **condition
        )
        return reply["ETag"]

    def try_acquire(self, me: Holder) -> Holder | None:
        stale = None
        try:
            self._etag = self._put(me, IfNoneMatch="*")
        except FileExistsError:  # PreconditionFailed: someone holds it, or held it and died
            found = self._head()
            if found is None:
                raise DataRootBusy(f"s3://{self.bucket}/{self.key}", None) from None  # just released: retry
            stale, etag, age = found
            if not (age > STALE_AFTER_S or (stale is not None and stale.alive_here() is False)):
                raise DataRootBusy(f"s3://{self.bucket}/{self.key}", stale) from None
            try:
                self._etag = self._put(me, IfMatch=etag)  # of two takers, one wins
            except OSError as exc:
                if not _lost_race(exc):
                    raise
                raise DataRootBusy(f"s3://{self.bucket}/{self.key}", self.holder()) from None
        self._me = me
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True, name="writer-lock-heartbeat")
        self._beat.start()
        return stale

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._etag = self._put(self._me, IfMatch=self._etag)
            except OSError as exc:
                if not _lost_race(exc):
                    continue  # the store is unreachable a moment: the next beat retries
                print(f"warning: lost the writer lock s3://{self.bucket}/{self.key} to another writer", file=sys.stderr)
                return

    def release(self) -> None:
        if self._etag is None:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        try:
            self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key, IfMatch=self._etag)
        except OSError as exc:
            if not _lost_race(exc):
                raise
            # taken over meanwhile: it is not ours to delete
        self._etag = None


def _lost_race(exc: OSError) -> bool:
    """A conditional request that lost: S3's PreconditionFailed (s3fs raises FileExistsError
    for If-None-Match, an EINVAL OSError for If-Match), or the object is gone meanwhile."""
    cause = exc.__cause__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code") if cause is not None else None
    return isinstance(exc, (FileExistsError, FileNotFoundError)) or code in ("PreconditionFailed", "412")
