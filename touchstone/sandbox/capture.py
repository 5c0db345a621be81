"""Bounded capture of a command's output: keeps the first `cap` bytes, but counts
and hashes the whole stream, so a flood is truncated without lying about its size."""

from __future__ import annotations

import hashlib
import os
from typing import Any


class OutputCapture:
    def __init__(self, cap: int):
        self.cap = cap
        self.head = bytearray()
        self.total = 0
        self._sha = hashlib.sha256()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._sha.update(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]

    def drain(self, fd: int) -> None:
        """Read a pipe to its end (run in a thread per stream)."""
        while chunk := os.read(fd, 1 << 16):
            self.feed(chunk)

    def fields(self, name: str) -> dict[str, Any]:
        """ExecResult fields for this stream (`name` is "stdout" or "stderr")."""
        return {
            name: self.head.decode("utf-8", errors="replace"),
            f"{name}_bytes": self.total,
            f"{name}_truncated": self.total > len(self.head),
            f"{name}_sha256": self._sha.hexdigest(),
        }
