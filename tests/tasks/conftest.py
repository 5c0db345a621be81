"""Shared fixtures: a tiny real project with a pytest suite (a local seed)."""

from __future__ import annotations

from pathlib import Path

import pytest

CALC = '''\
def clamp(x, lo, hi):
    """Limit x to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(xs):
    s = 0
    for x in xs:
        s += x
    return s


def mean(xs):
    if not xs:
        raise ValueError("mean of nothing")
    return total(xs) / len(xs)
'''

TESTS = """\
import pytest

from calc import clamp, mean, total


@pytest.mark.parametrize("x, want", [(-5, 0), (0, 0), (3, 3), (10, 10), (11, 10)])
def test_clamp(x, want):
    assert clamp(x, 0, 10) == want


def test_total():
    assert total([]) == 0
    assert total([1, 2, 3]) == 6
    assert total([-1, 1]) == 0


def test_mean():
    assert mean([2, 4]) == 3
    assert mean([5]) == 5


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])
"""


def write_calc(root: Path, broken: bool = False) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text(CALC)
    (root / "tests").mkdir()
    tests = TESTS + ("\n\ndef test_broken():\n    assert total([1]) == 2\n" if broken else "")
    (root / "tests" / "test_calc.py").write_text(tests)
    return root


@pytest.fixture
def calc_seed(tmp_path: Path) -> Path:
    root = write_calc(tmp_path / "calc-project")
    # history and caches that must never reach a workspace
    (root / ".git").mkdir()
    (root / ".git" / "ORIG_HEAD").write_text(CALC)
    (root / "calc" / "__pycache__").mkdir()
    (root / "calc" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0" * 8)
    (root / "calc" / "__init__.py.orig").write_text(CALC)
    return root
