"""Canonical serialization, input extraction and mutation of the oracle; the
runner file is standard-library only, so it is imported here directly."""

import importlib.util
import math

from touchstone.verify import oracle
from touchstone.harness import HARNESS_SRC

spec = importlib.util.spec_from_file_location("oracle_runner", HARNESS_SRC / "oracle_runner.py")
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class P:
    def __init__(self, x):
        self.x = x


def test_canonical_form_is_type_strict():
    c = runner.canon
    assert c(AlwaysEqual(3)) != c(3)  # the candidate's __eq__ is never consulted
    assert c(True) != c(1) and c(1) != c(1.0) and c((1, 2)) != c([1, 2])
    assert c(float("nan")) == c(float("nan")) and c(float("nan")) != c(2.5)
    assert c({3, 1, 2}) == c({1, 2, 3}) and c({"b": 1, "a": 2}) == c({"a": 2, "b": 1})
    assert c(P(1)) == c(P(1)) and c(P(1)) != c(P(2))
    assert c(-0.0) != c(0.0) and c(math.inf) == c(math.inf)


def test_encode_decode_round_trip():
    values = [(1, "a"), {1, 2}, frozenset({3}), b"\x00x", 1.5, float("inf"), {"k": [1, (2,)]}, None, True]
    for v in values:
        back = runner.decode(oracle.encode(v))
        assert runner.canon(back) == runner.canon(v)


def test_cases_from_literal_calls_and_mutations():
    src = {
        "tests/test_h.py": "from m import f\nimport pytest\n\n"
        "def test_a():\n    assert f(3, [1, 2]) == 4\n    assert f(x, 1) == 2\n    assert m.f('s', k=2) == 1\n"
        "@pytest.mark.parametrize('a', [1])\ndef test_b(a):\n    assert f(3, [1, 2]) == 4\n"
    }
    cases = oracle.extract_cases(src, [("m", "f")])
    assert [c.describe() for c in cases] == ["m.f(3, [1, 2])", "m.f('s', k=2)"]  # non-literal call skipped, deduplicated
    more = oracle.mutate_cases(cases, seed=0, limit=20)
    assert more[:2] == cases and 10 < len(more) <= 20 and all(c.mutated for c in more[2:])
    assert len(oracle.mutate_cases(cases, seed=0, limit=5)) == 5
    assert all(type(c.args[0]) is type(cases[0].args[0]) for c in more if c.args[1:] == cases[0].args[1:])


def test_compare_reports_the_first_counterexample():
    cases = [oracle.Case("m", "f", (1,), ()), oracle.Case("m", "f", (2,), (), mutated=True),
             oracle.Case("m", "f", (3,), (), mutated=True)]
    ref = {0: {"i": 0, "result": ["int", 1]}, 1: {"i": 1, "raised": "ValueError"}, 2: {"i": 2, "result": ["int", 3]}}
    good = [dict(ref), dict(ref)]
    assert oracle.compare(cases, ref, good) == (2, None)  # the input the reference rejects is dropped
    bad = [dict(ref), {**ref, 2: {"i": 2, "result": ["int", 4]}}]
    n, why = oracle.compare(cases, ref, bad)
    assert "generated input m.f(3)" in why and "reverse order" in why


def test_cases_from_parametrize_and_literal_loops():
    src = {
        "tests/test_h.py": "import pytest\nfrom m import f, g\n\n\n"
        "@pytest.mark.parametrize('a, b, want', [(1, 2, 3), (4, 5, 9), pytest.param(0, 0, 0, id='x')])\n"
        "@pytest.mark.parametrize('c', ['p', 'q'])\n"
        "def test_f(a, b, want, c):\n    assert f(a, b) == want\n    assert g(c) == c\n\n\n"
        "def test_loop():\n    for xs, want in [([1, 2], 1.5), ([3], 3.0)]:\n        assert g(xs) == want\n"
    }
    got = [c.describe() for c in oracle.extract_cases(src, [("m", "f"), ("m", "g")])]
    assert got == ["m.f(1, 2)", "m.f(4, 5)", "m.g('p')", "m.g('q')", "m.g([1, 2])", "m.g([3])"]
    more = oracle.mutate_cases(oracle.extract_cases(src, [("m", "f"), ("m", "g")]), limit=12)
    assert {c.function for c in more[6:]} == {"f", "g"}  # round-robin: every function gets mutations


def test_same_is_type_strict_but_tolerates_float_rounding():
    c = runner.canon
    assert oracle.same(c(0.1 + 0.2), c(0.3))  # summation order is not a wrong answer
    assert not oracle.same(c(0.31), c(0.3))
    assert not oracle.same(c(float("nan")), c(0.3)) and oracle.same(c(float("nan")), c(float("nan")))
    assert not oracle.same(c(1.0), c(1)) and not oracle.same(c(True), c(1))
    assert not oracle.same(c(AlwaysEqual(3)), c(3))
    assert oracle.same(c([1.0, (2.0, "x")]), c([1.0 + 1e-15, (2.0, "x")]))


def test_parametrize_values_from_module_constants():
    src = {"t.py": "import pytest\nimport m\n\nCASES = (('a b', 'a-b'), ('C', 'c'))\n\n\n"
                   "@pytest.mark.parametrize(('s', 'want'), CASES)\ndef test_p(s, want):\n    assert m.slug(s) == want\n"}
    assert [c.describe() for c in oracle.extract_cases(src, [("m", "slug")])] == ["m.slug('a b')", "m.slug('C')"]
