"""The oracle's codec (argument encoding, canonical results), case building,
mutation and comparison, without sandboxes. The harness files are standard
library only, so the runner's and recorder's pieces are imported directly."""

import builtins
import collections
import dataclasses
import datetime
import decimal
import fractions
import math

import pytest

from touchstone.verify import oracle
from touchstone.harness.sandbox_files import codec

canon = codec.canon


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class P:
    def __init__(self, x, cache=0):
        self.x, self._cache = x, cache


class Slotted:
    __slots__ = ("_b", "a")

    def __init__(self, a, b):
        self.a, self._b = a, b


@dataclasses.dataclass
class D:
    name: str
    n: int = 0


Pair = collections.namedtuple("Pair", "a b")


def gen(n):
    yield from range(n)


def test_canonical_form_is_type_strict():
    assert canon(AlwaysEqual(3)) != canon(3)  # the candidate's __eq__ is never consulted
    assert canon(True) != canon(1) and canon(1) != canon(1.0) and canon((1, 2)) != canon([1, 2])
    assert canon(float("nan")) == canon(float("nan")) and canon(float("nan")) != canon(2.5)
    assert canon({3, 1, 2}) == canon({1, 2, 3}) and canon({"b": 1, "a": 2}) == canon({"a": 2, "b": 1})
    assert canon(-0.0) != canon(0.0) and canon(math.inf) == canon(math.inf)


def test_objects_without_dict_are_encoded_by_content():
    """An empty result never equals a full one, whatever its type."""
    pairs = [
        (collections.Counter("aab"), collections.Counter()),
        (gen(3), gen(0)),
        (iter([1, 2]), iter([])),
        (map(str, [1]), map(str, [])),
        (collections.deque([1, 2], maxlen=3), collections.deque([], maxlen=3)),
        (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1)),  # order is content here
        (collections.defaultdict(list, a=[1]), collections.defaultdict(list)),
        (Pair(1, 2), Pair(1, 3)),
        (D("x", 1), D("x", 2)),
        (Slotted(1, 2), Slotted(2, 2)),
        (fractions.Fraction(1, 3), fractions.Fraction(1, 2)),
        (decimal.Decimal("1.0"), decimal.Decimal("1.00")),
        (datetime.date(2024, 1, 2), datetime.date(2024, 1, 3)),
    ]
    for full, empty in pairs:
        assert canon(full) != canon(empty), (full, empty)
    assert canon(collections.Counter("ab")) != canon({"a": 1, "b": 1})  # a subclass is not a dict
    assert canon(Pair(1, 2)) != canon((1, 2))
    assert canon(gen(3)) == canon(iter([0, 1, 2]))  # one-shot iterators compare by their items


def test_workspace_classes_compare_by_public_state():
    workspace = lambda t: t in (P, Slotted)
    assert canon(P(1, 0), workspace) == canon(P(1, 5), workspace)  # private attributes are the solution's business
    assert canon(P(1), workspace) != canon(P(2), workspace)
    assert canon(Slotted(1, 2), workspace) == canon(Slotted(1, 3), workspace)
    assert canon(P(1, 0)) != canon(P(1, 5))  # a foreign class: every attribute, private ones too


def test_iterators_are_bounded_and_record_failures():
    def endless():
        while True:
            yield 1

    def broken():
        yield 1
        raise KeyError("x")

    out = canon(endless())
    assert out[0] == "iterator" and len(out[1]) == codec.MAX_ITEMS + 1 and out[1][-1] == ["truncated"]
    assert canon(broken()) == ["iterator", [["int", 1], ["raised", "builtins.KeyError"]]]
    g = gen(2)
    assert canon(g, consume=False) == ["iterator", "not consumed"] and list(g) == [0, 1]  # left for the test


def test_cycles_terminate():
    xs = [1]
    xs.append(xs)
    assert canon(xs) == ["list", [["int", 1], ["cycle"]]]


def test_argument_round_trip():
    values = [
        (1, "a"),
        {1, 2},
        frozenset({3}),
        b"\x00x",
        bytearray(b"y"),
        1.5,
        float("inf"),
        {"k": [1, (2,)]},
        None,
        True,
        2 + 3j,
        collections.Counter("aab"),
        collections.OrderedDict(b=1, a=2),
        collections.deque([1], maxlen=4),
        fractions.Fraction(2, 3),
        decimal.Decimal("0.10"),
        datetime.datetime(2024, 5, 6, 7, 8, 9),
        datetime.timedelta(days=1, seconds=3),
        range(1, 9, 2),
        collections.defaultdict(int, {"a": 1}),
    ]
    for v in values:
        encoded = codec.encode(v, ref=lambda o: {"__t": "ref", "module": "builtins", "qualname": o.__qualname__})
        back = codec.decode(encoded, ref=lambda d: getattr(builtins, d["qualname"]))
        assert type(back) is type(v) and canon(back) == canon(v), v


def test_unreplayable_arguments_are_refused():
    with open(__file__) as f:
        for v in (lambda x: x, f, P(1), [1, object()]):
            with pytest.raises(codec.Unreplayable):
                codec.encode(v)


def test_any_iterable_equivalence():
    items = [1, 2]
    forms = [canon(gen(3)), canon([0, 1, 2]), canon((0, 1, 2)), canon(iter([0, 1, 2]))]
    assert len({str(codec.any_iterable(f)) for f in forms}) == 1
    assert codec.any_iterable(canon([0, 1])) != codec.any_iterable(canon(gen(3)))
    assert codec.any_iterable(canon({0, 1, 2})) != codec.any_iterable(canon([0, 1, 2]))  # sets are not sequences
    assert canon(items) != canon(tuple(items))  # without the contract, the type is part of the answer


def test_same_is_type_strict_but_tolerates_float_rounding():
    assert oracle.same(canon(0.1 + 0.2), canon(0.3))  # summation order is not a wrong answer
    assert not oracle.same(canon(0.31), canon(0.3))
    assert not oracle.same(canon(float("nan")), canon(0.3)) and oracle.same(canon(float("nan")), canon(float("nan")))
    assert not oracle.same(canon(1.0), canon(1)) and not oracle.same(canon(True), canon(1))
    assert oracle.same(canon([1.0, (2.0, "x")]), canon([1.0 + 1e-15, (2.0, "x")]))


def _step(i, test, args, kind="call", unreplayable=None):
    s = {"i": i, "test": test, "target": {"kind": kind, "module": "m", "qualname": "f"}, "args": args, "kwargs": {}}
    if unreplayable:
        s = {"i": i, "test": test, "unreplayable": unreplayable}
    return s


def test_cases_carry_their_dependencies_and_count_what_is_left_out():
    h = lambda i: {"__t": "handle", "step": i, "path": []}
    steps = [
        _step(0, None, [1]),
        _step(1, "t::a", [h(0), 2]),
        _step(2, "t::a", [3], unreplayable="lambda"),
        _step(3, "t::a", [h(2)]),
        _step(4, "t::b", [h(1), "x"]),
    ]
    rec = oracle.Recording({s["i"]: s for s in steps}, {"event": "done"})
    cases, dependent, capped = oracle.build_cases(rec)
    by_test = {c.test: c for c in cases}
    assert [s["i"] for s in by_test["t::a"].steps] == [0, 1] and by_test["t::a"].compared == {1}
    assert [s["i"] for s in by_test["t::b"].steps] == [0, 1, 4] and by_test["t::b"].compared == {4}
    assert by_test[None].compared == {0} and not capped
    assert rec.unreplayable == {"lambda": 1} and dependent == {"uses the result of a call that cannot be replayed": 1}


def test_caps_keep_the_fail_to_pass_tests(monkeypatch):
    steps = [_step(i, f"t::{i}", [i]) for i in range(5)]
    rec = oracle.Recording({s["i"]: s for s in steps}, {"event": "done"})
    monkeypatch.setattr(oracle, "MAX_CASES", 2)
    cases, _, capped = oracle.build_cases(rec, first=["t::4", "t::3"])
    assert [c.test for c in cases] == ["t::3", "t::4"] and capped == {"over the case cap": 3}


def test_mutations_change_one_plain_argument_and_keep_handles():
    h = {"__t": "handle", "step": 0, "path": []}
    case = oracle.Case(0, "t", [_step(0, "t", [3, [1, 2]]), _step(1, "t", [h, "ab"], kind="method")], {0, 1})
    more = oracle.mutate_cases([case], limit=40)
    assert 10 < len(more) <= 40 and all(c.mutated and len(c.compared) == 1 for c in more)
    for c in more:
        last = c.steps[-1]
        if last["i"] == 1:
            assert last["args"][0] == h and last["args"][1] != "ab"  # the handle is never mutated
    assert {c.steps[-1]["i"] for c in more} == {0, 1}  # round-robin: every call gets some
    assert len(oracle.mutate_cases([case], limit=5)) == 5


def test_compare_drops_the_reference_domain_and_unstable_steps():
    cases = [
        oracle.Case(0, "t", [_step(0, "t", [1]), _step(1, "t", [2])], {0, 1}),
        oracle.Case(1, "t", [_step(0, "t", [5])], {0}, mutated=True),
        oracle.Case(2, "t", [_step(0, "t", [6])], {0}, mutated=True),
    ]

    def run(v0, v1, mut1="ok", mut2=6):
        return {
            0: {0: {"out": ["ok", ["int", v0], []], "t": 0.001}, 1: {"out": ["ok", ["int", v1], []], "t": 0.001}},
            1: {0: {"out": [mut1, ["int", 5], []], "t": 0.001}},
            2: {0: {"out": ["ok", ["int", mut2], []], "t": 0.001}},
        }

    refs = [run(1, 2, mut1="raised"), run(1, 9, mut1="raised")]  # step 1 differs between reference runs
    contract = oracle.OracleContract()
    cmp = oracle.compare(cases, refs, [run(1, 7), run(1, 7)], contract)
    assert (cmp.compared, cmp.unstable, cmp.mutated_dropped, cmp.counterexample) == (2, 1, 1, None)
    cmp = oracle.compare(cases, refs, [run(1, 7), run(1, 7, mut2=0)], contract)
    assert "generated input: m.f(6) (reverse order)" in cmp.counterexample
    recorded = {0: {"result": ["int", 4]}, 1: {"raised": "KeyError"}}  # the test saw 4 where the replay sees 1
    assert oracle.compare(cases, refs, [run(1, 7), run(1, 7)], contract, recorded).context_dependent == 1


def test_contract_validation():
    assert oracle.contract_of({}).iterables == "exact"
    assert oracle.contract_of({"oracle": {"iterables": "any", "max_slowdown": 5}}).max_slowdown == 5
    for bad in ({"iterables": "some"}, {"max_slowdown": 0.5}, {"speed": 1}):
        with pytest.raises(ValueError, match="source.meta.oracle"):
            oracle.contract_of({"oracle": bad})


def test_recordings_are_cached_once_finished(tmp_path, monkeypatch):
    monkeypatch.setenv("TOUCHSTONE_CACHE", str(tmp_path))
    calls = []

    def record(summary):
        calls.append(1)
        return oracle.Recording({0: _step(0, "t::a", [1])}, summary)

    assert oracle.cached_recording("k1", lambda: record(None)) == (oracle.Recording({0: _step(0, "t::a", [1])}), False)
    assert oracle.cached_recording("k1", lambda: record({"event": "done"}))[1] is False  # unfinished: not stored
    rec, cached = oracle.cached_recording("k1", lambda: record(None))
    assert cached and rec.steps[0]["args"] == [1] and rec.summary == {"event": "done"} and len(calls) == 2
    assert oracle.cached_recording(None, lambda: record({"event": "done"}))[1] is False  # no key, no cache
    assert oracle.recording_key("a", None) != oracle.recording_key("b", None)


def test_a_subclass_of_the_reference_exception_agrees():
    class Invalid(ValueError):
        pass

    ref, sub, other = codec.raised(ValueError()), codec.raised(Invalid()), codec.raised(KeyError())
    assert oracle.agrees(ref, sub) and oracle.agrees(ref, ref)  # as pytest.raises(ValueError) would accept
    assert not oracle.agrees(sub, ref) and not oracle.agrees(ref, other)
    assert "builtins.LookupError" in other[2] and not oracle.agrees(ref, ["ok", ["none", None], []])


def test_a_replay_of_many_cases_keeps_every_process_output(tmp_path):
    """The reference's three runs of 650 cases write 13 cases files and 13
    outcome files per run into the output dir: past the dir's default file
    count the later processes died, and every step looked non-deterministic
    (the oracle compared nothing on a large task)."""
    (tmp_path / "sq.py").write_text("def sq(n):\n    return n * n\n")
    target = {"kind": "call", "module": "sq", "qualname": "sq"}
    cases = [oracle.Case(i, "t", [{"i": i, "target": target, "args": [i], "kwargs": {}}], {i}) for i in range(650)]
    replay, timed_out = oracle.replay_reference(tmp_path, cases, key=None, timeout=120, backend="bwrap")
    assert not timed_out and [len(run) for run in replay.runs] == [650, 650, 650]
    assert replay.runs[2][649][649]["out"][:2] == ["ok", ["int", 649 * 649]]
