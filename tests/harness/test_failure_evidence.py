"""A failing test's evidence names what the candidate's code raised, its
message and where in the candidate's code, isolated (the exception crossed
from the candidate's process) as in process: never a line of the harness's
own wire module. The candidates are generated: every kind of exception below
raised from every shape of code, directly or two calls deep in another module."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.harness.test_isolation import run

KINDS = {  # a statement that raises, as candidate code writes it
    "builtin": 'raise ValueError("bad value 7")',
    "key": 'raise KeyError("k")',
    "own-class": 'raise ParseError("no digits in x")',
    "own-str": 'raise Odd("not shown")',
    "interpreter": "return 1 // 0",
    "stdlib": 'return json.loads("{")',
    "non-str-args": "raise RuntimeError(3, [1, 2])",
}
PRELUDE = "import json\n\nfrom errors import ParseError\n\n\nclass Odd(LookupError):\n    def __str__(self):\n        return 'odd one'\n"
ERRORS = "class ParseError(Exception):\n    pass\n"
SHAPES = ("function", "generator", "constructor", "method", "property")


def _expected_raise(kind: str, module: str) -> tuple[str, str]:
    """(type, message) of the kind's statement, raised here as if in `module`."""
    space: dict = {}
    exec(PRELUDE.replace("from errors import ParseError", ERRORS), space)
    exec(f"def f():\n    {KINDS[kind]}\n", space)
    try:
        space["f"]()
    except Exception as exc:
        cls = type(exc)
        name = (
            cls.__qualname__ if cls.__module__ in ("builtins", "__main__") else f"{cls.__module__}.{cls.__qualname__}"
        )
        name = {"ParseError": "errors.ParseError", "Odd": f"{module}.Odd"}.get(name, name)
        return name, str(exc).splitlines()[0]
    raise AssertionError(f"{kind} does not raise")


class _Source:
    """A module being written, knowing the line of everything it holds."""

    def __init__(self, prelude: str):
        self.lines = prelude.splitlines()

    def add(self, *lines: str) -> int:
        """Append lines; the line number of the last one."""
        self.lines += ["", "", *lines]
        return len(self.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _generate() -> tuple[dict[str, str], str, dict[str, tuple[str, str, str]]]:
    """(workspace files, test module, test name -> (type: message, file:line, function))."""
    mod, deep = _Source(PRELUDE + "\nimport deep\n"), _Source(PRELUDE)
    tests, expected = ["import mod", ""], {}
    for n, (kind, shape, depth) in enumerate(itertools.product(KINDS, SHAPES, (0, 2))):
        if depth:  # the raise lives two calls deep, in another module
            line = deep.add(f"def leaf{n}():", f"    {KINDS[kind]}")
            deep.add(f"def mid{n}():", f"    return leaf{n}()")
            body, where, func = f"return deep.mid{n}()", f"deep.py:{line}", f"leaf{n}"
        else:
            body, where, func = KINDS[kind], None, None
        header, call, own = {
            "function": ([f"def f{n}():"], f"mod.f{n}()", f"f{n}"),
            "generator": ([f"def g{n}():", "    yield 1"], f"list(mod.g{n}())", f"g{n}"),
            "constructor": ([f"class C{n}:", "    def __init__(self):"], f"mod.C{n}()", "__init__"),
            "method": ([f"class M{n}:", "    def run(self):"], f"mod.M{n}().run()", "run"),
            "property": ([f"class P{n}:", "    @property", "    def value(self):"], f"mod.P{n}().value", "value"),
        }[shape]
        indent = " " * (4 * (1 + (shape in ("constructor", "method", "property"))))
        line = mod.add(*header, indent + body)
        name = f"test_{kind.replace('-', '_')}_{shape}_{depth}"
        tests += [f"def {name}():", f"    {call}", "", ""]
        expected[name] = (
            ": ".join(_expected_raise(kind, "deep" if depth else "mod")),
            where or f"mod.py:{line}",
            func or own,
        )
    files = {"mod.py": mod.text(), "deep.py": deep.text(), "errors.py": ERRORS}
    return files, "\n".join(tests), expected


@pytest.mark.parametrize("in_process", [False, True], ids=["isolated", "in-process"])
def test_the_evidence_names_the_candidates_exception_and_where_it_was_raised(tmp_path: Path, in_process: bool):
    files, tests, expected = _generate()
    result = run(tmp_path, files, {"tests/test_raises.py": tests}, in_process=in_process)
    assert result.status == "fail" and not result.passed, result.evidence
    assert len(result.failed) == len(expected) == 70, result.evidence
    for name, (raised, where, func) in expected.items():
        why = result.failed[f"tests/test_raises.py::{name}"]
        assert why.startswith(f"call failed: {raised}") and f"(raised at {where} in {func})" in why, (name, why)
        assert "wire.py" not in why and "/mnt/" not in why, (name, why)
        assert result.raised_at[f"tests/test_raises.py::{name}"] == where, name
        # messages feed task statements: what was raised, never the line to fix
        assert result.messages[f"tests/test_raises.py::{name}"].startswith(raised), name
        assert where not in result.messages[f"tests/test_raises.py::{name}"], name
    assert "wire.py" not in result.evidence.split("output tail:")[0], result.evidence


def test_a_test_callback_failing_inside_candidate_code_is_placed_in_the_test(tmp_path: Path):
    """The exception crosses twice (judge -> candidate -> judge): it keeps its origin, the test's line."""
    workspace = {"apply.py": "def apply(f, xs):\n    return [f(x) for x in xs]\n"}
    tests = {
        "tests/test_apply.py": "import apply\n\n\ndef test_apply():\n    apply.apply(lambda x: {}[x], [1])\n",
    }
    result = run(tmp_path, workspace, tests)
    why = result.failed["tests/test_apply.py::test_apply"]
    assert why.startswith("call failed: KeyError: 1 (raised at tests/test_apply.py:5 in <lambda>)"), why


def test_the_origin_record_survives_a_json_round_trip_only_as_plain_data():
    from touchstone.harness.isolation.remote import wire

    try:
        json.loads("{")
    except ValueError as exc:
        origin = wire.origin_of(exc, str(Path(json.__file__).parent))
    assert origin["type"] == "json.decoder.JSONDecodeError" and origin["at"][0] == "decoder.py", origin
    assert wire._checked_origin(json.loads(json.dumps(origin))) == origin
    with pytest.raises(wire.IsolationBroken):
        wire._checked_origin({"type": "X", "at": ["a.py", "12", "f"]})  # a line that is not an int


@pytest.mark.parametrize("in_process", [False, True], ids=["isolated", "in-process"])
def test_a_candidate_module_failing_at_import_is_named_in_the_collection_error(tmp_path: Path, in_process: bool):
    files, tests, expected = {"errors.py": ERRORS}, {}, {}
    for kind, statement in KINDS.items():
        name = kind.replace("-", "_")
        source = _Source(PRELUDE)
        line = source.add(statement.replace("return ", "_ = "))  # at module level, while the test imports it
        files[f"bad_{name}.py"] = source.text()
        tests[f"tests/test_imports_{name}.py"] = f"import bad_{name}\n\n\ndef test_it():\n    pass\n"
        raised = ": ".join(_expected_raise(kind, f"bad_{name}"))
        expected[f"tests/test_imports_{name}.py"] = (raised, f"(raised at bad_{name}.py:{line} in <module>)")
    result = run(tmp_path, files, tests, in_process=in_process)
    assert result.status == "fail" and "collection errors in" in result.evidence, result.evidence
    first, where = next((e for e in expected.values() if f"(first: {e[0]} {e[1]})" in result.evidence), (None, None))
    assert first and "wire.py" not in result.evidence.split("output tail:")[0], result.evidence
    # collect_errors feed task statements: what was raised, never the line to fix
    assert result.collect_errors == {path: raised for path, (raised, _) in expected.items()}, result.collect_errors
