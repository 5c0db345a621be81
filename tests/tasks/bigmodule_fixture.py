"""A SWE-bench-format instance on a real library of realistic size: the standard
library's pure-Python decimal module (`_pydecimal`, 6,400 lines, one class of
3,400) copied from this interpreter into a git repository as `pydecimal.py`,
with human-written tests. The base commit carries a one-line bug in the method
`Decimal._round_half_down` (an exact half rounds up); the gold patch fixes that
line and the test patch adds the tests that catch it. Nothing is fetched.

`make_instance` also times the instance's own before/after test runs (pytest on
the host, base and fixed tree), the yardstick for import + validation time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import _pydecimal

REPO = "python/pydecimal"
MODULE = "pydecimal.py"
GOOD = "        if _exact_half(self._int, prec):\n            return -1\n        else:\n            return self._round_half_up(prec)\n"
BUG = GOOD.replace("return -1", "return 1")
ENV_SPECS = {REPO: {"setup": []}}  # a single module at the repository root: nothing to install

BASE_TESTS = """\
import pytest

from pydecimal import (
    ROUND_DOWN,
    ROUND_HALF_DOWN,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    InvalidOperation,
)


@pytest.mark.parametrize("value, want", [("2.5", "3"), ("-2.5", "-3"), ("2.4", "2"), ("0.05", "0")])
def test_quantize_half_up(value, want):
    assert Decimal(value).quantize(Decimal("1"), rounding=ROUND_HALF_UP) == Decimal(want)


@pytest.mark.parametrize("value, want", [("2.5", "2"), ("3.5", "4"), ("-0.5", "-0"), ("2.51", "3")])
def test_quantize_half_even(value, want):
    assert Decimal(value).quantize(Decimal("1"), rounding=ROUND_HALF_EVEN) == Decimal(want)


@pytest.mark.parametrize("value, want", [("2.51", "3"), ("2.49", "2"), ("-7.2", "-7")])
def test_quantize_half_down_away_from_half(value, want):
    assert Decimal(value).quantize(Decimal("1"), rounding=ROUND_HALF_DOWN) == Decimal(want)


def test_round_down_truncates():
    assert Decimal("9.99").quantize(Decimal("0.1"), rounding=ROUND_DOWN) == Decimal("9.9")


def test_arithmetic():
    assert Decimal("1.1") + Decimal("2.2") == Decimal("3.3")
    assert Decimal("1.30") * Decimal("1.20") == Decimal("1.5600")
    assert Decimal(7) / Decimal(4) == Decimal("1.75")
    assert str(Decimal(1) / Decimal(3)) == "0.3333333333333333333333333333"


def test_sqrt_and_exp():
    ctx = Context(prec=10)
    assert ctx.sqrt(Decimal(2)) == Decimal("1.414213562")
    assert ctx.exp(Decimal(1)) == Decimal("2.718281828")


def test_invalid_operation_traps():
    with pytest.raises(InvalidOperation):
        Context(traps=[InvalidOperation]).sqrt(Decimal(-1))


def test_string_forms():
    assert str(Decimal("1E+3")) == "1E+3"
    assert Decimal("123.4500").normalize() == Decimal("123.45")
    assert Decimal("-0").is_signed()
"""

NEW_TESTS = """

@pytest.mark.parametrize("value, want", [("2.5", "2"), ("-2.5", "-2"), ("3.5", "3"), ("0.5", "0")])
def test_quantize_half_down_exact_half(value, want):
    assert Decimal(value).quantize(Decimal("1"), rounding=ROUND_HALF_DOWN) == Decimal(want)


def test_context_half_down():
    ctx = Context(prec=2, rounding=ROUND_HALF_DOWN)
    assert ctx.plus(Decimal("1.25")) == Decimal("1.2")
    assert ctx.plus(Decimal("1.26")) == Decimal("1.3")
    assert ctx.divide(Decimal(1), Decimal(8)) == Decimal("0.12")
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def _pytest(repo: Path) -> tuple[set[str], set[str], float]:
    """(passed ids, failed ids, seconds) of one pytest run of the repository's tests."""
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "test_pydecimal.py"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout
    seconds = time.monotonic() - t0
    passed = {line.split()[1] for line in out.splitlines() if line.startswith("PASSED ")}
    failed = {line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")}
    return passed, failed, seconds


def make_instance(root: Path) -> tuple[Path, Path, dict, float]:
    """(repos dir, instances.jsonl, the instance, seconds of its before/after test runs)."""
    source = Path(_pydecimal.__file__).read_text()
    assert source.count(GOOD) == 1, "this interpreter's _pydecimal has no single _round_half_down to break"
    repos = root / "repos"
    repo = repos / REPO.replace("/", "__")
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / MODULE).write_text(source.replace(GOOD, BUG))
    (repo / "test_pydecimal.py").write_text(BASE_TESTS)
    base = _commit(repo, "pydecimal with the half-down bug")
    (repo / MODULE).write_text(source)
    patch = _git(repo, "diff", "--", MODULE)
    (repo / "test_pydecimal.py").write_text(BASE_TESTS + NEW_TESTS)
    test_patch = _git(repo, "diff", "--", "test_pydecimal.py")
    _commit(repo, "fix ROUND_HALF_DOWN on exact halves, with tests")
    after_pass, after_fail, after_s = _pytest(repo)
    _git(repo, "checkout", "-q", base, "--", MODULE)  # the before run: the base module, the new tests
    before_pass, _before_fail, before_s = _pytest(repo)
    _git(repo, "checkout", "-q", "HEAD", "--", MODULE)
    assert not after_fail, f"the fixed module fails its own tests: {sorted(after_fail)}"
    f2p = sorted(after_pass - before_pass)
    p2p = sorted(after_pass & before_pass)
    assert f2p and p2p
    instance = {
        "instance_id": "python__pydecimal-1", "repo": REPO, "base_commit": base, "patch": patch,
        "test_patch": test_patch, "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p),
        "problem_statement": "ROUND_HALF_DOWN rounds an exact half up: "
        "Decimal('2.5').quantize(Decimal('1'), rounding=ROUND_HALF_DOWN) gives 3, not 2.",
        "version": "1",
    }  # fmt: skip
    jsonl = root / "instances.jsonl"
    jsonl.write_text(json.dumps(instance) + "\n")
    return repos, jsonl, instance, before_s + after_s
