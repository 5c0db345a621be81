"""The action log: one JSONL record per exec / read / write that went through the
harness, appended by the harness on the host, in a file no sandbox can see. The
auditor reads this log (from the verifier's own replay), never agent output.
Format: docs/formats/sandbox.md."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel


class ActionRecord(BaseModel):
    seq: int  # 0-based, monotonic within one log file (across the sandboxes that share it)
    time: float  # unix seconds when the action started
    op: Literal["exec", "read", "write"]
    sandbox_id: str
    backend: str
    image_digest: str
    environment_digest: str | None = None  # the task environment mounted at /usr/local (None: base)
    args: dict[str, Any]  # exec: {command, timeout, env}; read/write: {path}
    ok: bool  # exec: exit 0 and no timeout; read/write: the operation succeeded
    error: str | None = None  # read/write refused or failed: why
    # exec only
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool | None = None
    oom_killed: bool | None = None
    wall_s: float | None = None
    stdout_sha256: str | None = None  # of the whole stream, not just the captured part
    stderr_sha256: str | None = None
    stdout_bytes: int | None = None
    stderr_bytes: int | None = None
    # read/write only: the file content
    content_sha256: str | None = None
    content_bytes: int | None = None


class ActionLog:
    """Appends records to a JSONL file. Each record is one `write()` on an O_APPEND
    descriptor, so sandboxes sharing a file (in one process) never interleave lines."""

    # Serializes seq assignment across the sandboxes of this process that share a file.
    _lock = threading.Lock()
    _next: dict[Path, int] = {}

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def append(self, **fields: Any) -> ActionRecord:
        with self._lock:
            if self.path not in self._next:  # continue an existing file's numbering
                with open(self.path, "rb") as handle:
                    self._next[self.path] = sum(1 for _ in handle)
            record = ActionRecord(seq=self._next[self.path], **fields)
            os.write(self._fd, (record.model_dump_json() + "\n").encode())
            self._next[self.path] += 1
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_action_log(path: Path) -> list[ActionRecord]:
    """All records of a log file, in order; a malformed line raises naming its number."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                records.append(ActionRecord.model_validate_json(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not an action record: {exc}") from exc
    return records


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
