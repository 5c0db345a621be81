"""`ast.parse` safe to call from several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide
state, so two threads building trees at once can fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython
gh-106905). Validation and verification parse candidate code from worker
threads; every parse in the domain library goes through this lock. Parses
outside it (pytest's assertion rewriting of a module imported in a thread,
a library's own `ast.parse`) can still race with one inside: the full test
suite hit it once in a task importer's worker. Such a parse is retried: the
error says nothing about the source."""

from __future__ import annotations

import ast
import threading
from functools import lru_cache

_LOCK = threading.Lock()
_RACE = "AST constructor recursion depth mismatch"
TRIES = 3


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs) -> ast.AST:
    """`ast.parse`, one thread at a time, retried when another thread's parse raced it."""
    for _ in range(TRIES - 1):
        with _LOCK:
            try:
                return ast.parse(source, filename, mode, **kwargs)
            except SystemError as exc:
                if _RACE not in str(exc):
                    raise
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)


@lru_cache(maxsize=8)
def parse_shared(source: str) -> ast.Module:
    """`parse(source)`, one tree per text for every caller that only reads it:
    validating one task parses its big reference and workspace modules in a dozen
    checks. The tree is shared: never change it (not even for a moment: other
    threads read it); callers that edit a tree use `parse`. A SyntaxError is not
    cached (the next caller parses again and gets it)."""
    return parse(source)
