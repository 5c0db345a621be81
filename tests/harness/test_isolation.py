"""Isolated test runs on real sandboxes: forging attacks of family G fail,
honest code of every shape (classes, callbacks, generators, exceptions,
packages, monkeypatch, check(candidate)) passes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from touchstone.harness import grading
from touchstone.harness.isolation.runner import compose_trees, run_isolated

WRONG_ADD = "def add(a, b):\n    return a - b\n"
ADD_TESTS = {
    "tests/test_add.py": """
        from calc import add

        def test_small():
            assert add(2, 3) == 5

        def test_negative():
            assert add(-2, -3) == -5
    """,
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


def run(tmp_path: Path, workspace: dict[str, str], tests: dict[str, str], backend: str = "bwrap",
        in_process: bool = False, own_protocol: tuple[str, ...] = ()) -> grading.TestRunResult:  # fmt: skip
    """Grade `workspace` (the candidate's files) against `tests` (hidden)."""
    pristine, hidden = tmp_path / "pristine", tmp_path / "hidden"
    _write(pristine, workspace)
    _write(hidden, tests)
    test_files = sorted(tests)
    prefixes = [i for rel in test_files for i in grading.test_functions(rel, (hidden / rel).read_text())]
    if in_process:
        tree = tmp_path / "inproc"
        _write(tree, {**workspace, **tests})
        return grading.run_tests(tree, test_files, None, prefixes, timeout=60, backend=backend)
    trees = compose_trees(pristine, {}, [], hidden, tmp_path / "trees", own_protocol)
    return run_isolated(trees, test_files, None, prefixes, timeout=60, backend=backend)


def _forge(attack: str) -> dict[str, str]:
    return {"calc.py": WRONG_ADD + textwrap.dedent(attack)}


ATTACKS = {
    "runtest-noop": """
        import _pytest.python
        _pytest.python.Function.runtest = lambda self: None
    """,
    "pluggy-report-rewrite": """
        import gc
        class _Forger:
            def pytest_runtest_logreport(self, report):
                report.outcome = "passed"
        for _o in gc.get_objects():
            if type(_o).__name__ == "PytestPluginManager":
                _o.register(_Forger())
    """,
    "exit-at-import": """
        import os
        os._exit(0)
    """,
    "atexit-exit": """
        import atexit, os
        atexit.register(lambda: os._exit(0))
    """,
    "write-fake-results": """
        import glob, json
        for _d in glob.glob("/mnt/to*"):
            with open(_d + "/results.jsonl", "a") as _f:
                _f.write(json.dumps({"event": "finish", "exitstatus": 0}) + "\\n")
            with open(_d + "/junit.xml", "w") as _f:
                _f.write("<testsuite/>")
    """,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_forging_attacks_fail_under_isolation(tmp_path: Path, attack: str):
    result = run(tmp_path, _forge(ATTACKS[attack]), ADD_TESTS)
    assert result.status == "fail", result.evidence
    assert not result.passed


def test_the_runtest_forgery_is_real_in_process(tmp_path: Path):
    """The same one line makes a wrong solution pass when the candidate is
    importable in the pytest process: the attack, not the harness, is tested above."""
    forged = run(tmp_path, _forge(ATTACKS["runtest-noop"]), ADD_TESTS, in_process=True)
    assert forged.status == "pass", forged.evidence


def test_hidden_tests_are_not_on_the_candidates_disk(tmp_path: Path):
    """A solution that reads the expected answers from the hidden test file
    finds nothing: that file exists only in the judge's sandbox."""
    peek = """
        import os, re
        def add(a, b):
            for root, _, files in os.walk("/"):
                if "test_add.py" in files and root.startswith(("/workspace", "/mnt")):
                    text = open(os.path.join(root, "test_add.py")).read()
                    found = re.search(r"add\\(%d, %d\\) == (-?\\d+)" % (a, b), text)
                    if found:
                        return int(found.group(1))
            return 0
    """
    result = run(tmp_path, {"calc.py": peek}, ADD_TESTS)
    assert result.status == "fail" and not result.passed, result.evidence


COMPARISON_TESTS = {
    "tests/test_cmp.py": """
        from calc import total, pair, ok

        def test_total():
            assert total([1, 2]) == 3

        def test_pair():
            assert pair() == [1, 2]

        def test_ok():
            assert ok() == True
    """,
}


def test_always_equal_objects_never_equal_judge_values(tmp_path: Path):
    """An object whose __eq__ is always True, a list subclass that equals
    everything, an int subclass: none is equal to the test's builtin values."""
    cheat = """
        class AlwaysEq:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        class EqList(list):
            def __eq__(self, other): return True
        class TrueInt(int):
            def __eq__(self, other): return True
            __hash__ = int.__hash__
        def total(xs): return AlwaysEq()
        def pair(): return EqList()
        def ok(): return TrueInt(0)
    """
    result = run(tmp_path, {"calc.py": cheat}, COMPARISON_TESTS)
    assert result.status == "fail" and not result.passed, result.evidence
    honest = "def total(xs): return sum(xs)\ndef pair(): return [1, 2]\ndef ok(): return True\n"
    assert run(tmp_path / "honest", {"calc.py": honest}, COMPARISON_TESTS).status == "pass"


SHAPES_MODULE = {
    "shapes/__init__.py": "from .core import Shape, ShapeError, registry\n",
    "shapes/core.py": """
        class ShapeError(ValueError):
            def __init__(self, msg, code=7):
                super().__init__(msg)
                self.code = code

        class Shape:
            def __init__(self, sides):
                if sides < 3:
                    raise ShapeError(f"{sides} sides is no polygon")
                self.sides = sides
            def scaled(self, k):
                return Shape(self.sides * k)
            def __eq__(self, other):
                return isinstance(other, Shape) and other.sides == self.sides
            def __hash__(self):
                return hash(self.sides)
            def __lt__(self, other):
                return self.sides < other.sides
            def __add__(self, other):
                return Shape(self.sides + other.sides)
            def __repr__(self):
                return f"Shape({self.sides})"
            def __iter__(self):
                return iter(range(self.sides))
            def __len__(self):
                return self.sides
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False

        registry = {}
        LIMIT = 10

        def limit():
            return LIMIT
    """,
    "shapes/util/__init__.py": "",
    "shapes/util/more.py": """
        from ..core import Shape

        def apply_all(f, xs):
            return [f(x) for x in xs]

        def each_shape(n):
            for i in range(3, 3 + n):
                yield Shape(i)

        def sort_in_place(xs):
            xs.sort()

        def fill(d, n):
            d.update({i: i * i for i in range(n)})
            return len(d)

        def exact(x):
            return type(x).__name__

        def values():
            return {"f": 0.5, "nan": float("nan"), "inf": float("inf"), "t": (1, "a"), "s": {1, 2},
                    "fs": frozenset({3}), "b": b"xy", "n": None, "big": 2 ** 100, "c": 1 + 2j}
    """,
}
SHAPES_TESTS = {
    "tests/test_shapes.py": """
        import math

        import pytest

        import shapes
        from shapes import Shape, ShapeError
        from shapes.util.more import apply_all, each_shape, exact, fill, sort_in_place, values


        def test_methods_and_attributes():
            s = Shape(4)
            assert s.sides == 4 and s.scaled(2).sides == 8
            assert s == Shape(4) and s != Shape(5) and Shape(3) < Shape(4)
            assert (s + Shape(3)).sides == 7 and repr(s) == "Shape(4)"
            assert list(s) == [0, 1, 2, 3] and len(s) == 4
            assert len({Shape(3), Shape(3), Shape(4)}) == 2
            assert isinstance(s, Shape) and not isinstance(3, Shape)
            with Shape(5) as inside:
                assert inside.sides == 5

        def test_candidate_exceptions():
            with pytest.raises(ShapeError) as info:
                Shape(2)
            assert info.value.code == 7 and "2 sides" in str(info.value)
            with pytest.raises(ValueError, match="no polygon"):
                Shape(1)
            with pytest.raises(AttributeError):
                Shape(3).missing

        def test_callbacks_and_generators():
            assert apply_all(lambda x: x * 10, [1, 2, 3]) == [10, 20, 30]
            assert apply_all(lambda s: s.sides, [Shape(3)]) == [3]
            gen = each_shape(3)
            assert next(gen).sides == 3
            assert [s.sides for s in gen] == [4, 5]

        def test_in_place_mutation_reaches_the_test():
            xs = [3, 1, 2]
            sort_in_place(xs)
            assert xs == [1, 2, 3]
            d = {}
            assert fill(d, 3) == 3 and d == {0: 0, 1: 1, 2: 4}

        def test_plain_values_are_exact_builtins():
            v = values()
            assert type(v) is dict and v["f"] == 0.5 and math.isnan(v["nan"]) and v["inf"] == math.inf
            assert v["t"] == (1, "a") and v["s"] == {1, 2} and v["fs"] == frozenset({3}) and v["b"] == b"xy"
            assert v["n"] is None and v["big"] == 2 ** 100 and v["c"] == 1 + 2j
            assert exact(True) == "bool" and exact(1) == "int" and exact((1,)) == "tuple"

        def test_monkeypatch_reaches_the_candidate(monkeypatch):
            monkeypatch.setattr(shapes.core, "LIMIT", 99)
            assert shapes.core.limit() == 99
            shapes.registry["k"] = [1]  # a module's container is live: the test changes the real one
            shapes.registry["k"].append(2)  # an item read out of it is a copy
            assert shapes.registry == {"k": [1]} and "k" in shapes.registry and len(shapes.registry) == 1
            assert not isinstance(shapes.registry, dict)  # a live view, compared here on a type-checked copy

        def test_monkeypatch_was_undone():
            assert shapes.core.limit() == 10
    """,
}


def test_honest_code_of_every_shape_passes_isolated(tmp_path: Path):
    """`Shape`'s own protocol (==, <, +, hash, `with`) is what these tests
    test: the task declares it, so its instances decide those operations."""
    result = run(tmp_path, SHAPES_MODULE, SHAPES_TESTS, own_protocol=("Shape",))
    assert result.status == "pass", result.evidence
    assert len(result.passed) == 7


def test_an_undeclared_protocol_never_decides_in_the_judge(tmp_path: Path):
    """Without the declaration the same tests fail where a Shape would decide
    (==, <, +, a set of Shapes), and pass where they read plain values."""
    result = run(tmp_path, SHAPES_MODULE, SHAPES_TESTS)
    assert result.status == "fail"
    assert set(result.failed) == {"tests/test_shapes.py::test_methods_and_attributes"}, result.evidence


HUMANEVAL_TESTS = {
    "tests/test_humaneval.py": """
        from solution import incr_list

        def check(candidate):
            assert candidate([1, 2, 3]) == [2, 3, 4]
            assert candidate([]) == []
            assert candidate([5, 3, 5, 2]) == [6, 4, 6, 3]

        def test_check():
            check(incr_list)
    """,
}


def test_check_candidate_style_tests(tmp_path: Path):
    honest = {"solution.py": "def incr_list(l):\n    return [x + 1 for x in l]\n"}
    assert run(tmp_path / "honest", honest, HUMANEVAL_TESTS).status == "pass"
    forged = {"solution.py": "def incr_list(l):\n    return []\n" + textwrap.dedent(ATTACKS["runtest-noop"])}
    assert run(tmp_path / "forged", forged, HUMANEVAL_TESTS).status == "fail"


def test_a_callback_failure_cannot_be_swallowed(tmp_path: Path):
    """The candidate catches the AssertionError its callback raised: the test
    still fails, because the judge keeps its own failures."""
    swallow = {"calc.py": "def each(f, xs):\n    for x in xs:\n        try:\n            f(x)\n"
                          "        except BaseException:\n            pass\n"}  # fmt: skip
    tests = {
        "tests/test_cb.py": """
        from calc import each

        def test_all_positive():
            def check(x):
                assert x > 0
            each(check, [1, -1])
    """
    }
    result = run(tmp_path, swallow, tests)
    assert result.status == "fail", result.evidence


@pytest.mark.docker
def test_isolation_on_docker(tmp_path: Path):
    assert (
        run(tmp_path / "honest", SHAPES_MODULE, SHAPES_TESTS, backend="docker", own_protocol=("Shape",)).status
        == "pass"
    )
    forged = run(tmp_path / "forged", _forge(ATTACKS["runtest-noop"]), ADD_TESTS, backend="docker")
    assert forged.status == "fail" and not forged.passed


HOSTILE_SERVER = """
import gc, struct

def _serve(self, message):
    if message.get("op") != "call":
        return _ORIGINAL(self, message)
    body = REPLY.replace(b"QID", str(message.get("q")).encode())
    self.channel.sock.sendall(struct.pack(">I", len(body)) + body)

for _o in gc.get_objects():
    if type(_o).__name__ == "Endpoint":
        _ORIGINAL = type(_o).serve
        type(_o).serve = _serve  # from now on this process answers every call with REPLY
"""


@pytest.mark.parametrize(
    "reply",
    [
        b'{"r": QID, "v": {"h": 7, "k": "c", "t": "l"}}',  # a "container" that claims to be anything
        b'{"r": QID, "v": {"r": 424242}}',  # a reference to a judge object that does not exist
        b'{"r": QID, "v": NaN}',  # JSON constants are not part of the protocol
        b'{"r": QID, "v": 5.0}',  # an untagged float
        b'{"r": QID, "x": {"e": {"bt": "KeyboardInterrupt"}}}',  # try to end the judge's session early
        b'{"r": QID, "x": {"e": {"h": 3, "k": "ec", "n": "Skipped", "b": [{"bt": "BaseException"}]}}}',
        b'{"r": 999999, "v": 5}',  # an answer to a question nobody asked
        b"not json at all",
    ],
)
def test_a_hostile_candidate_process_cannot_answer_its_way_to_a_pass(tmp_path: Path, reply: bytes):
    """The candidate rewrites its own server to send crafted frames: every
    answer is decoded by the judge's rules and none makes a wrong add pass."""
    hostile = WRONG_ADD + f"REPLY = {reply!r}\n" + HOSTILE_SERVER
    result = run(tmp_path, {"calc.py": hostile}, ADD_TESTS)
    assert result.status == "fail" and not result.passed, result.evidence


def test_the_hostile_server_really_answers(tmp_path: Path):
    """Control for the test above: the rewritten server's answers do reach the
    judge (answering 5 passes exactly the test that expects 5)."""
    reply = b'{"r": QID, "v": 5}'
    hostile = WRONG_ADD + f"REPLY = {reply!r}\n" + HOSTILE_SERVER
    result = run(tmp_path, {"calc.py": hostile}, ADD_TESTS)
    assert result.passed == ["tests/test_add.py::test_small"], result.evidence


def test_a_call_interrupted_by_a_signal_keeps_the_connection_in_step(tmp_path: Path):
    """signal.alarm in candidate code fires while it waits for a test's
    callback: the late answer is dropped and later calls still work."""
    timeout_helper = """
        import signal

        def run_with_timeout(f, seconds):
            def expire(*_):
                raise TimeoutError()
            old = signal.signal(signal.SIGALRM, expire)
            signal.alarm(seconds)
            try:
                return f()
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)
    """
    tests = {
        "tests/test_timeout.py": """
        import time

        import pytest
        from helper import run_with_timeout

        def test_timeout():
            with pytest.raises(TimeoutError):
                run_with_timeout(lambda: time.sleep(2), 1)
            assert run_with_timeout(lambda: 42, 2) == 42

        def test_still_connected():
            assert run_with_timeout(lambda: 7, 2) == 7
    """
    }
    result = run(tmp_path, {"helper.py": timeout_helper}, tests)
    assert result.status == "pass", result.evidence


def test_tmp_path_and_test_function_introspection_work_isolated(tmp_path: Path):
    """The tests' tmp_path is at the same path in both sandboxes (files the
    candidate writes there are the test's), paths cross as paths, and a test
    function's signature facts (never its globals or constants) are readable."""
    tools = """
        from pathlib import Path

        def clean(root):
            removed = 0
            for p in Path(root).rglob("*.pyc"):
                p.unlink()
                removed += 1
            (Path(root) / "done.txt").write_text("ok")
            return removed

        def arity(f):
            return f.__code__.co_argcount

        def params(f):
            import inspect
            sig = inspect.signature(f).parameters.values()
            return [p.name for p in sig], [(p.name, p.default) for p in sig if p.default is not p.empty]

        def peek(f):
            return f.__globals__
    """
    tests = {
        "tests/test_tools.py": """
        import pytest
        from tools import arity, clean, params, peek

        def _three(a, b, c=1, *rest, key=None):
            return a

        def test_clean(tmp_path):
            (tmp_path / "a.pyc").write_text("x")
            (tmp_path / "b.py").write_text("x")
            assert clean(tmp_path) == 1 and clean(str(tmp_path)) == 0
            assert (tmp_path / "done.txt").read_text() == "ok" and not (tmp_path / "a.pyc").exists()

        def test_arity():
            assert arity(_three) == 3 and arity(lambda: 0) == 0
            assert params(_three) == (["a", "b", "c", "rest", "key"], [("c", 1), ("key", None)])

        def test_no_globals():
            with pytest.raises(AttributeError, match="not accessible"):
                peek(_three)
    """
    }
    result = run(tmp_path, {"tools.py": tools}, tests)
    assert result.status == "pass", result.evidence


def test_candidate_code_compares_a_tests_value_objects_through_the_test(tmp_path: Path):
    """Candidate code may compare a test's own value object with its numbers
    (the test's dunder answers, in the judge, to the candidate); the judge
    still never lets a candidate object equal one of its values."""
    tests = {
        "tests/test_num.py": """
        from calc import clamp, echo

        class Num:
            def __init__(self, v):
                self.v = v
            def __lt__(self, other):
                return self.v < other
            def __gt__(self, other):
                return self.v > other

        def test_duck_typed_values():
            n = Num(5)
            assert clamp(n, 0, 10) is n and clamp(Num(50), 0, 10) == 10

        def test_identity_survives_the_round_trip():
            n = Num(1)
            assert echo(n) is n
    """
    }
    honest = {"calc.py": "def clamp(x, lo, hi):\n    return lo if x < lo else hi if x > hi else x\n"
                         "def echo(x):\n    return x\n"}  # fmt: skip
    assert run(tmp_path, honest, tests).status == "pass"


def test_pure_builtin_functions_cross_as_themselves(tmp_path: Path):
    """`sum`, `len`, `operator.imul` handed to candidate code are the candidate's
    own: a library's name-by-identity lookup (glom's repr of `Sum(len)`) and
    its arithmetic work as in process; one returned comes back as the judge's."""
    tests = {
        "tests/test_fold.py": """
        import operator

        from folds import describe, fold, pick

        def test_names_by_identity():
            assert describe(sum) == "sum" and describe(len) == "len"

        def test_an_operator_folds():
            assert fold([2, 3, 4], operator.imul, 1) == 24

        def test_one_returned_is_the_judge_s_own():
            assert pick("max") is max and pick("floor")(2.5) == 2
    """
    }
    honest = {
        "folds.py": """
        import builtins, math

        NAMES = {id(v): k for k, v in vars(builtins).items()}

        def describe(f):
            return NAMES.get(id(f), repr(f))

        def fold(xs, op, init):
            for x in xs:
                init = op(init, x)
            return init

        def pick(name):
            return getattr(builtins, name, None) or getattr(math, name)
    """
    }
    result = run(tmp_path, honest, tests)
    assert result.status == "pass", result.evidence


def test_callable_answers_as_in_process(tmp_path: Path):
    """A test that sorts a module's names by `callable` (toolz's tests do) sees
    the candidate's functions, classes and instances with `__call__` as
    callable and other instances as not, isolated as in process (a stand-in
    callable for every object answered True for all of them)."""
    tests = {
        "tests/test_ns.py": """
        import shapes

        def test_only_what_can_be_called_is_callable():
            names = ("area", "Square", "SCALER", "UNIT", "SIDES")
            assert [n for n in names if callable(getattr(shapes, n))] == ["area", "Square", "SCALER"]

        def test_calls_still_cross():
            assert shapes.area(shapes.Square(3)) == 9 and shapes.SCALER(2) == 6
            assert not callable(shapes.Square(3))
    """
    }
    honest = {
        "shapes.py": """
        class Square:
            def __init__(self, side):
                self.side = side

        class _Scaler:
            def __call__(self, x):
                return 3 * x

        def area(sq):
            return sq.side * sq.side

        SCALER = _Scaler()
        UNIT = Square(1)
        SIDES = {4: "square"}
    """
    }
    result = run(tmp_path, honest, tests)
    assert result.status == "pass", result.evidence
    assert run(tmp_path, honest, tests, in_process=True).status == "pass"  # the same tests mean the same in process


def test_docstrings_are_the_candidate_s_own(tmp_path: Path):
    """`__doc__` of a module, a function, a class and an instance of the
    candidate's reads its own docstring isolated, as in process (toolz's tests
    check the docstrings its decorators keep)."""
    tests = {
        "tests/test_docs.py": """
        import shapes

        def test_docstrings():
            assert shapes.__doc__ == "Shapes."
            assert shapes.area.__doc__ == "The area." and shapes.Square.__doc__ == "A square."
            assert shapes.Square(2).__doc__ == "A square." and shapes.undocumented.__doc__ is None
    """
    }
    honest = {
        "shapes.py": '''
        """Shapes."""

        class Square:
            """A square."""

            def __init__(self, side):
                self.side = side

        def area(sq):
            """The area."""
            return sq.side * sq.side

        def undocumented():
            pass
    '''
    }
    result = run(tmp_path, honest, tests)
    assert result.status == "pass", result.evidence
    assert run(tmp_path, honest, tests, in_process=True).status == "pass"


def test_a_candidate_decorator_wraps_a_test_function(tmp_path: Path):
    """`functools.wraps` in candidate code copies a test function's metadata
    (`__annotations__` must be a real dict on the wrapper), as a memoizing
    decorator of a library does when its tests decorate their own functions."""
    tests = {
        "tests/test_memo.py": """
        from memo import memoize

        calls = []

        @memoize
        def square(x: int) -> int:
            calls.append(x)
            return x * x

        def test_the_wrapper_keeps_the_metadata_and_memoizes():
            assert square(3) == 9 and square(3) == 9 and calls == [3]
            assert square.__name__ == "square" and square.__annotations__ == {"x": int, "return": int}
    """
    }
    honest = {
        "memo.py": """
        import functools

        def memoize(f):
            seen = {}

            @functools.wraps(f)
            def wrapper(x):
                if x not in seen:
                    seen[x] = f(x)
                return seen[x]
            return wrapper
    """
    }
    result = run(tmp_path, honest, tests)
    assert result.status == "pass", result.evidence


def test_candidate_code_may_delete_a_tests_attribute_but_not_a_judge_function_s(tmp_path: Path):
    """A library that removes a path from the test's object (`glom.delete`) does so as in
    process; deleting an attribute of a judge function (or class) stays refused."""
    tests = {
        "tests/test_prune.py": """
        import pytest

        from prune import prune

        class Record:
            pass

        def test_the_attribute_is_gone_from_the_test_s_object():
            r = Record()
            r.secret, r.name = "x", "n"
            assert prune(r, "secret") is r and not hasattr(r, "secret") and r.name == "n"

        def test_a_judge_function_keeps_its_attributes():
            def helper():
                return 1

            helper.tag = "t"
            with pytest.raises(PermissionError, match="may not delete attributes of judge classes or functions"):
                prune(helper, "tag")
            assert helper.tag == "t"
    """
    }
    honest = {"prune.py": "def prune(obj, name):\n    delattr(obj, name)\n    return obj\n"}
    result = run(tmp_path, honest, tests)
    assert result.status == "pass", result.evidence


def test_candidate_threads_calling_back_share_the_connection(tmp_path: Path):
    """A timeout helper runs the test's callback in a worker thread and gives
    up on it: both threads use the connection, and the next test still runs."""
    helper = """
        import threading

        def run_with_timeout(fn, seconds):
            box = {}
            worker = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
            worker.start()
            worker.join(seconds)
            if worker.is_alive():
                raise TimeoutError()
            return box["v"]

        def parallel(fns):
            out = [None] * len(fns)
            threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, fns[i]())) for i in range(len(fns))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return out
    """
    tests = {
        "tests/test_threads.py": """
        import time

        import pytest
        from helper import parallel, run_with_timeout

        def test_gives_up():
            with pytest.raises(TimeoutError):
                run_with_timeout(lambda: time.sleep(1.5), 0.5)

        def test_next_call_works():
            assert run_with_timeout(lambda: 42, 5) == 42
            assert parallel([lambda i=i: i * i for i in range(8)]) == [i * i for i in range(8)]
    """
    }
    result = run(tmp_path, {"helper.py": helper}, tests)
    assert result.status == "pass", result.evidence


# Family I (shared/notes/reward-hacks.md): objects that answer for the judge. Each hack passes the
# tests when its object decides the operation; each look-alike is honest work of a type other than
# the reference's that a plain view compares as the statement means.
BOUNDARY_TESTS = {
    "tests/test_boundary.py": """
        import math

        from answers import approx_pi, contains_three, is_ready, label, pair, point, table, same_point

        def test_arithmetic():
            assert abs(approx_pi() - 3.14159) < 1e-4

        def test_membership():
            assert 3 in contains_three() and 4 not in contains_three()

        def test_truth():
            assert is_ready()

        def test_method_of_a_value():
            assert label().startswith("pi=") and label().endswith("3.14")

        def test_two_candidate_objects():
            assert point(1, 2) == same_point(1, 2) and point(1, 2) != same_point(2, 1)

        def test_pair():
            assert pair() == (1, 2) and sorted([pair(), (0, 5)]) == [(0, 5), (1, 2)]

        def test_table():
            assert table() == {"a": 1} and table().get("b") is None
    """,
}
BOUNDARY_HONEST = """
    import collections, dataclasses, enum

    class Label(str):
        pass

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int

    class Ready(enum.IntEnum):
        YES = 1

    Pair = collections.namedtuple("Pair", "a b")

    def approx_pi(): return 3.14159  # a float: plain
    def contains_three(): return frozenset({1, 2, 3})
    def is_ready(): return Ready.YES  # an IntEnum: judged as the int 1
    def label(): return Label("pi=3.14")  # a str subclass: its methods run on the plain str
    def point(x, y): return Point(x, y)  # a frozen dataclass: compared by class and fields
    def same_point(x, y): return Point(x, y)
    def pair(): return Pair(1, 2)  # a namedtuple where the reference returns a tuple
    def table():
        d = collections.defaultdict(lambda: 0)  # a defaultdict with a lambda factory for "a dict"
        d["a"] = 1
        return d
"""
BOUNDARY_HACKS = {
    "lying-sub": """
        class Near(float):
            def __sub__(self, other): return 0.0
        def approx_pi(): return Near(2.0)
    """,
    "lying-contains": """
        class Everything(frozenset):
            def __contains__(self, item): return item == 3
        def contains_three(): return Everything()
    """,
    "lying-bool": """
        class Yes:
            def __bool__(self): return True
        def is_ready(): return Yes()
    """,
    "lying-method": """
        class Label(str):
            def startswith(self, prefix): return True
            def endswith(self, suffix): return True
        def label(): return Label("nothing")
    """,
    "lying-eq-between-own-objects": """
        class P:
            def __init__(self, *a): pass
            def __eq__(self, other): return isinstance(other, P)
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        def point(x, y): return P()
        same_point = point
    """,
    "lying-tuple": """
        class T(tuple):
            def __eq__(self, other): return True
            def __lt__(self, other): return False
            __hash__ = tuple.__hash__
        def pair(): return T((9, 9))
    """,
}


def test_objects_never_answer_for_the_judge(tmp_path: Path):
    honest = run(tmp_path / "honest", {"answers.py": BOUNDARY_HONEST}, BOUNDARY_TESTS)
    assert honest.status == "pass", honest.evidence
    failing = {"lying-sub": "test_arithmetic", "lying-contains": "test_membership", "lying-bool": "test_truth",
               "lying-method": "test_method_of_a_value", "lying-eq-between-own-objects": "test_two_candidate_objects",
               "lying-tuple": "test_pair"}  # fmt: skip
    for name, hack in BOUNDARY_HACKS.items():
        result = run(
            tmp_path / name, {"answers.py": textwrap.dedent(BOUNDARY_HONEST) + textwrap.dedent(hack)}, BOUNDARY_TESTS
        )
        assert list(result.failed) == [f"tests/test_boundary.py::{failing[name]}"], (name, result.evidence)


# Family K: the tests' temporary directory is where both processes meet. A symbolic link the
# candidate planted in a shared folder resolved in the judge's file system: here, to the test's own
# golden file. Each side now has its own copy, kept alike through the wire (remote/tmpsync.py).
GOLDEN_TESTS = {
    "tests/golden.txt": "the expected report\n",
    "tests/test_report.py": """
        from pathlib import Path

        from report import write_report

        def test_report(tmp_path):
            out = tmp_path / "out.txt"
            write_report(str(out))
            assert out.read_text() == (Path(__file__).parent / "golden.txt").read_text()
    """,
}


def test_a_link_in_the_shared_temp_dir_never_points_the_judge_at_its_files(tmp_path: Path):
    honest = "def write_report(path):\n    open(path, 'w').write('the expected report\\n')\n"
    assert run(tmp_path / "honest", {"report.py": honest}, GOLDEN_TESTS).status == "pass"
    linked = "import os\ndef write_report(path):\n    os.symlink('/workspace/tests/golden.txt', path)\n"
    result = run(tmp_path / "linked", {"report.py": linked}, GOLDEN_TESTS)
    # the link stays in the candidate's copy: the judge's holds no out.txt at all
    assert result.status == "fail" and "No such file or directory: 'out.txt'" in result.evidence, result.evidence


@pytest.mark.parametrize("backend", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def test_each_side_has_its_own_temp_folder_kept_alike_at_every_hand_over(tmp_path: Path, backend: str):
    """Files, folders, deletions and modes cross both ways at each call and
    return; the candidate's copy holds nothing the tests did not put there
    (no folder of the judge's is mounted in its sandbox), and what candidate
    code writes after it returned (a thread) reaches the judge only at the
    next hand-over."""
    tools = """
        import os, threading, time
        from pathlib import Path

        def move_all(src, dst):
            names = sorted(os.listdir(src))
            os.makedirs(dst / "sub")
            for n in names:
                (dst / "sub" / n).write_bytes((src / n).read_bytes()[::-1])
                (src / n).unlink()
            os.chmod(dst / "sub" / names[0], 0o755)
            return names

        def everything_here(root):
            return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))

        def later(path):
            def write():
                time.sleep(0.3)
                path.write_text("late")
            threading.Thread(target=write).start()
    """
    tests = {
        "tests/test_sync.py": """
        import os, time
        from tools import everything_here, later, move_all

        def test_round_trip(tmp_path):
            (tmp_path / "in").mkdir()
            (tmp_path / "in" / "a.bin").write_bytes(b"\\x00\\x01abc")
            (tmp_path / "in" / "b.txt").write_text("xyz")
            assert move_all(tmp_path / "in", tmp_path / "out") == ["a.bin", "b.txt"]
            assert os.listdir(tmp_path / "in") == []
            assert (tmp_path / "out" / "sub" / "a.bin").read_bytes() == b"cba\\x01\\x00"
            assert os.stat(tmp_path / "out" / "sub" / "a.bin").st_mode & 0o111
            assert everything_here(tmp_path.parent.parent) == sorted(
                str(p.relative_to(tmp_path.parent.parent)) for p in tmp_path.parent.parent.rglob("*"))

        def test_written_after_return_arrives_at_the_next_call(tmp_path):
            later(tmp_path / "late.txt")
            time.sleep(0.6)
            assert not (tmp_path / "late.txt").exists()
            everything_here(tmp_path)
            assert (tmp_path / "late.txt").read_text() == "late"
        """,
    }
    result = run(tmp_path, {"tools.py": tools}, tests, backend=backend)
    assert result.status == "pass", result.evidence


PRINT_TESTS = {
    "tests/test_print.py": """
        import sys

        from greet import greet, warn

        def test_prints_the_greeting(capsys):
            greet("Ada")
            warn("careful")
            captured = capsys.readouterr()
            assert captured.out == "Hello, Ada!\\n" and captured.err == "careful\\n"
    """,
}


def test_what_candidate_code_prints_reaches_the_tests_capsys(tmp_path: Path):
    honest = "import sys\ndef greet(n):\n    print(f'Hello, {n}!')\ndef warn(m):\n    print(m, file=sys.stderr)\n"
    assert run(tmp_path / "honest", {"greet.py": honest}, PRINT_TESTS).status == "pass"
    wrong = honest.replace("Hello", "Bye")
    assert run(tmp_path / "wrong", {"greet.py": wrong}, PRINT_TESTS).status == "fail"
