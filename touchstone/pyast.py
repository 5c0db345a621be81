"""`ast.parse` safe to call from several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide
state, so two threads building trees at once can fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython
gh-106905). Validation and verification parse candidate code from worker
threads; every parse in the domain library goes through this lock."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs) -> ast.AST:
    """`ast.parse`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)
