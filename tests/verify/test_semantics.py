"""Declared comparison semantics (`source.meta.oracle`): each honest look-alike
the strict rule rejects is accepted under the key that declares its latitude,
and only under it; a wrong answer stays wrong under every key."""

from __future__ import annotations

import collections
import dataclasses
from fractions import Fraction

import pytest

from touchstone.harness.sandbox_files import codec
from touchstone.verify import oracle
from touchstone.verify.domain import InputDomain, shown, statement_bounds
from touchstone.verify.semantics import agrees, normalize


def ok(x) -> list:
    """An outcome; `x` may be a function making the answer (an iterator is used up once compared)."""
    return ["ok", codec.canon(x() if callable(x) else x), []]


def judged(reference, candidate, **declared) -> bool:
    contract = oracle.contract_of({"oracle": declared})
    return agrees(normalize(ok(reference), contract), normalize(ok(candidate), contract), contract)


Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    x: int
    y: int


def _counting() -> collections.defaultdict:
    d = collections.defaultdict(int)
    d["a"] += 2
    return d


# (name, reference's answer, an honest candidate's answer, a wrong one, the key that declares the latitude)
LOOKALIKES = [
    ("2.0 for 2", 2, 2.0, 3.0, {"numbers": "value"}),
    ("a Fraction for a float", 0.5, Fraction(1, 2), Fraction(1, 3), {"numbers": "value"}),
    ("a defaultdict for a dict", {"a": 2}, _counting(), {"a": 3}, {"mappings": "any"}),
    ("a Counter for a dict", {"a": 2}, collections.Counter(a=2), collections.Counter(a=1), {"mappings": "any"}),
    ("sorted output for any order", [3, 1, 2], [1, 2, 3], [1, 2, 2], {"order": "any"}),
    ("a namedtuple for a tuple", (1, 2), Pair(1, 2), Pair(2, 1), {"records": "fields"}),
    ("a frozen dataclass for a dataclass", Point(1, 2), FrozenPoint(1, 2), FrozenPoint(1, 3), {"records": "fields"}),
    ("a list for an iterable", lambda: iter([1, 2]), [1, 2], [2, 1], {"iterables": "any"}),
    ("a near float", 0.1, 0.1001, 0.2, {"float_rel_tol": 1e-2}),
]


@pytest.mark.parametrize("name, reference, honest, wrong, declared", LOOKALIKES, ids=[x[0] for x in LOOKALIKES])
def test_declared_latitude_accepts_the_lookalike_and_nothing_wrong(name, reference, honest, wrong, declared):
    assert not judged(reference, honest), "the strict default must tell them apart"
    assert judged(reference, honest, **declared)
    assert not judged(reference, wrong, **declared)


def test_free_text_is_not_compared_but_its_type_is():
    assert not judged("Sum is 3.", "The sum is 3.")
    assert judged("Sum is 3.", "The sum is 3.", text="free")
    assert not judged("Sum is 3.", 3, text="free")


def test_exception_family():
    class BadInput(ValueError):
        pass

    ref, plain, other = codec.raised(BadInput()), codec.raised(ValueError()), codec.raised(KeyError())
    strict, family = oracle.contract_of({}), oracle.contract_of({"oracle": {"exceptions": "family"}})
    assert not agrees(ref, plain, strict)  # a plain ValueError is not a BadInput
    assert agrees(ref, plain, family) and not agrees(ref, other, family)


def test_bool_is_never_a_number():
    assert not judged(1, True, numbers="value")


def test_an_invalid_declaration_is_one_clear_error():
    with pytest.raises(ValueError, match="order"):
        oracle.contract_of({"oracle": {"order": "sorted"}})
    assert oracle.contract_of({"oracle": {"own_protocol": ["Vec2"]}}).own_protocol == ("Vec2",)


def _fib_case() -> oracle.Case:
    steps = [
        {"i": i, "test": "t", "target": {"kind": "call", "module": "fib", "qualname": "fib"}, "args": [n], "kwargs": {}}
        for i, n in enumerate((0, 1, 10))
    ]
    return oracle.Case(0, "t", steps, {0, 1, 2})


def test_generated_inputs_stay_in_the_domain_the_tests_show():
    """fib is tested on n >= 0: no generated input is negative, whatever the
    reference would tolerate; texts and sequences are never emptied when no
    test passes an empty one."""
    generated = [c.steps[-1]["args"][0] for c in oracle.mutate_cases([_fib_case()], limit=100)]
    assert generated and all(n >= 0 for n in generated), generated
    assert 11 in generated or 9 in generated  # neighbours inside the domain are still generated
    assert not shown("", ["ab", "c"]) and shown("", ["ab", ""])
    assert not shown(0, [3, 5]) and shown(0, [0, 5]) and shown(-2, [-1, 5])


def test_the_domain_follows_lengths_characters_items_and_the_statement(tmp_path):
    """Beyond sign, zero and emptiness: a length every tested value shares,
    the characters the tested texts use, the items of tested sequences, and
    bounds the statement states on a parameter by name."""
    assert not shown("FF", ["ff", "10"]) and shown("01", ["ff", "10"])  # no upper case in a lower-case hex
    assert not shown([1, 2, 3], [[1, 2], [3, 4]]) and shown([2, 1], [[1, 2], [3, 4]])  # fixed-size input
    assert not shown([1, -2], [[1, 2], [3]]) and shown([1, 0], [[0, 2], [3]])  # items keep their sign
    bounds = statement_bounds("Return the digit sum of `n` for 1 <= n <= 10**6; `len(xs) ≤ 8`; k is between 2 and 9.")
    assert (bounds["n"].lo, bounds["n"].hi, bounds["len(xs)"].hi, bounds["k"].lo) == (1, 1e6, 8, 2)
    (tmp_path / "digits.py").write_text("def digit_sum(n):\n    return sum(map(int, str(n)))\n")
    domain = InputDomain.of("Return the digit sum of `n`, 1 <= n <= 1000.", tmp_path)
    target = {"kind": "call", "module": "digits", "qualname": "digit_sum"}
    assert domain.within(999, [600], target, 0) and not domain.within(1203, [600], target, 0)
    steps = [{"i": 0, "test": "t", "target": target, "args": [600], "kwargs": {}}]
    generated = [c.steps[-1]["args"][0] for c in oracle.mutate_cases([oracle.Case(0, "t", steps, {0})], domain=domain)]
    assert generated and all(1 <= n <= 1000 for n in generated), generated


def test_a_speed_contract_needs_a_statement_that_states_its_bound():
    """A complexity bound or a time limit, not a word such as "fast"; a
    declaration without one is a validation problem and is never enforced."""
    bound = {"oracle": {"max_slowdown": 5}}
    for unstated in ("Return the n-th Fibonacci number.", "Return the n-th Fibonacci number, fast.",
                     "An efficient, high-performance Fibonacci.", "Use an O-ring (see OEIS)."):  # fmt: skip
        problems = oracle.contract_problems(unstated, bound)
        assert problems and "states no complexity bound or time limit" in problems[0], unstated
        assert oracle.contract_in_force(unstated, bound)[0].max_slowdown is None
    for stated in ("Return the n-th Fibonacci number in linear time.", "Fibonacci in O(n) time.",
                   "Sort in O(n log(n)).", "Answer within 50 ms for n up to 10**5.", "Time limit of 2 seconds."):  # fmt: skip
        assert oracle.contract_problems(stated, bound) == [], stated
        assert oracle.contract_in_force(stated, bound)[0].max_slowdown == 5
    assert oracle.contract_problems("Anything.", {"oracle": {"order": "sorted"}})[0].startswith("task.json")
    assert oracle.contract_problems("Anything.", {}) == []


def test_identity_is_compared_unless_the_task_leaves_it_open():
    """A returned argument (`alias`) or an object handed out twice (`again`)
    differs from a fresh copy of the same value; `identity: "any"` compares
    the value only."""
    fresh, alias, again = (
        ["list", [["int", 1]]],
        ["alias", 1, ["list", [["int", 1]]]],
        ["again", ["list", [["int", 1]]]],
    )
    strict, loose = oracle.OracleContract(), oracle.OracleContract(identity="any")
    assert not agrees(normalize(fresh, strict), normalize(alias, strict), strict)
    assert not agrees(normalize(fresh, strict), normalize(again, strict), strict)
    assert agrees(normalize(fresh, loose), normalize(alias, loose), loose)
    assert agrees(normalize(fresh, loose), normalize(again, loose), loose)
