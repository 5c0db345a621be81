"""What counts as a test, the one definition every stage uses.

A *test module* is a file pytest collects under the harness's own ini
(`python_files = test_*.py *_test.py`). A *test file* is anything that belongs
to a task's tests: a test module, a `conftest.py`, or any file below a `tests`,
`test` or `testing` directory (helpers and data the tests read). The verifier
protects test files from the candidate, validation and the proposers run test
modules, the mutation proposer never mutates test files, and the teacher does
not edit them: one rule, so a file the verifier protects is never one another
stage treats as library code.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

TEST_DIRS = frozenset({"tests", "test", "testing"})
TEST_MODULE_PATTERNS = ("test_*.py", "*_test.py")  # also the harness ini's python_files


def is_test_module(rel: str) -> bool:
    """A file pytest collects (workspace-relative POSIX path)."""
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pat) for pat in TEST_MODULE_PATTERNS)


def is_test_file(rel: str) -> bool:
    """A file that belongs to the tests: test module, conftest.py, or below a test directory."""
    parts = rel.split("/")
    return is_test_module(rel) or parts[-1] == "conftest.py" or any(p in TEST_DIRS for p in parts[:-1])


def outermost_test_dirs(dirs: Iterable[str]) -> list[str]:
    """The outermost test directories (`tests`, `test`, `testing`) holding any of
    `dirs`: everything below one of them is a test file, so the harness mounts
    each read-only over the graded workspace."""
    found = set()
    for d in dirs:
        parts = d.split("/")
        cut = next((i for i, p in enumerate(parts) if p in TEST_DIRS), None)
        if cut is not None:
            found.add("/".join(parts[: cut + 1]))
    return sorted(d for d in found if not any(d.startswith(o + "/") for o in found))


def test_dirs(workspace_files: Iterable[str], hidden_files: Iterable[str]) -> set[str]:
    """Directories holding a task's tests: those of the workspace's test files
    and of every hidden-test file (relative paths; the root is not one)."""
    dirs = {rel.rpartition("/")[0] for rel in workspace_files if is_test_file(rel)}
    dirs |= {rel.rpartition("/")[0] for rel in hidden_files}
    return {d for d in dirs if d not in ("", ".")}
