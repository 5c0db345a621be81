"""Hand-made tasks in the documented task format (docs/formats/task.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from touchstone.tasks.schema import Task, load_task

MINILIB = '''\
def clamp(x, lo, hi):
    """Clamp x into [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def mean(xs):
    if not xs:
        raise ValueError("mean of nothing")
    return sum(xs) / len(xs)


def is_sorted(xs):
    for i in range(len(xs) - 1):
        if xs[i] > xs[i + 1]:
            return False
    return True


def chunk(xs, n):
    return [xs[i:i + n] for i in range(0, len(xs), n)]


def count_vowels(s):
    total = 0
    for ch in s.lower():
        if ch in "aeiou":
            total += 1
    return total


def both_positive(a, b):
    return a > 0 and b > 0
'''

MINILIB_TESTS = """\
from minilib.core import both_positive, chunk, clamp, count_vowels, is_sorted, mean


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-2, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_is_sorted():
    assert is_sorted([1, 2, 2, 5])
    assert not is_sorted([3, 1])


def test_chunk():
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_count_vowels():
    assert count_vowels("Banana") == 3


def test_both_positive():
    assert both_positive(1, 2)
    assert not both_positive(1, -2)
"""


def write_task(root: Path, task_id: str, statement: str, workspace: dict[str, str], hidden: dict[str, str]) -> Task:
    """A task directory: task.json, workspace/ and hidden_tests/ from file maps."""
    task_dir = root / task_id
    for sub, files in (("workspace", workspace), ("hidden_tests", hidden)):
        for rel, text in files.items():
            path = task_dir / sub / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    (task_dir / "task.json").write_text(json.dumps({"id": task_id, "statement": statement}))
    return load_task(task_dir)


def minilib_task(root: Path, task_id: str, statement: str, mutated: str, visible_tests: str = MINILIB_TESTS) -> Task:
    """A mutation-style task: minilib with one injected bug, visible and hidden tests."""
    return write_task(
        root,
        task_id,
        statement,
        {"minilib/__init__.py": "", "minilib/core.py": mutated, "tests/test_core.py": visible_tests},
        {"tests/test_core.py": MINILIB_TESTS},
    )


@pytest.fixture
def simple_task(tmp_path: Path) -> Task:
    return minilib_task(
        tmp_path, "clamp-flip", "`clamp` ignores the upper bound.", MINILIB.replace("if x > hi:", "if x <= hi:")
    )
