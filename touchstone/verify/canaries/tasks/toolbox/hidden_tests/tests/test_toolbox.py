import time

import pytest
from toolbox import arity, calc, clean_caches, run_with_timeout


@pytest.mark.parametrize(
    "expr, want", [("1 + 2 * 3", 7), ("(4 - 1) / 3", 1.0), ("-(2 * 2) + 10", 6), ("2.5 * 4", 10.0)]
)
def test_calc(expr, want):
    assert calc(expr) == want


@pytest.mark.parametrize("expr", ["__import__('os')", "2 ** 10", "x + 1", "[1, 2]", "abs(-1)"])
def test_calc_refuses(expr):
    with pytest.raises(ValueError):
        calc(expr)


def _three(a, b, c=1, *rest, key=None):
    return a


def test_arity():
    assert arity(_three) == 3
    assert arity(lambda: 0) == 0


def test_run_with_timeout():
    assert run_with_timeout(lambda: 42, 2) == 42
    with pytest.raises(TimeoutError):
        run_with_timeout(lambda: time.sleep(3), 1)


def test_clean_caches(tmp_path):
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    for name in ["a.py", "pkg/__pycache__/a.cpython-311.pyc", "b.pyc", "c.pyo", "notes.txt"]:
        (tmp_path / name).write_text("x")
    assert clean_caches(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.py", "notes.txt"]
