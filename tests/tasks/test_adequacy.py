"""Adequacy pieces without the sandbox: mutation sites over every changed
top-level statement, a sample that ignores the task id, guard-only failures,
trivial baselines."""

from __future__ import annotations

import collections
from pathlib import Path

from tests.tasks.adversarial import CASES, Case
from touchstone.taskmaking import adequacy
import ast

from touchstone import pyast
from touchstone.tasks.mutate import change_sites, changed_statements, changed_units, render


def _case(cid: str):
    return next(c for c in CASES if c.id == cid)


def test_fixes_in_a_table_and_a_nested_class_have_mutation_sites(tmp_path: Path) -> None:
    table = adequacy.all_mutants(_case("honest-table").write(tmp_path))
    assert table and {m.line for m in table} == {1} and "change_constant" in {m.operator for m in table}
    nested = adequacy.all_mutants(_case("honest-nested-class").write(tmp_path))
    assert any(m.operator == "arith_swap" and m.line == 8 for m in nested)


def test_changed_statements_and_every_site_below_them() -> None:
    ref = 'LIMIT = 3\nNAMES = {"a": "x"}\n\n\ndef f(x):\n    """doc"""\n    return x + LIMIT\n'
    ws = ref.replace("LIMIT = 3", "LIMIT = 4").replace('"x"}', '"y"}')
    assert changed_statements(ref, ws) == [0, 1]
    tree = pyast.parse(ref)
    muts = [m for site in change_sites(tree, ref, ws, "m") if (m := render(ref, tree, site, "m.py"))]
    assert {m.operator for m in muts} == {"change_constant", "change_string"} and all(m.lineno <= 2 for m in muts)


def test_a_fix_in_a_method_of_a_big_class_mutates_that_method_only() -> None:
    methods = "".join(f"    def m{i}(self, x):\n        return x + {i}\n\n" for i in range(300))
    ws = "class Big:\n" + methods + "    def fixed(self, x):\n        return x - 1\n"
    ref = ws.replace("return x - 1", "return x * 2 + 1")
    tree = pyast.parse(ref)
    [(unit, name)] = changed_units(tree, ref, ws)
    assert name == "Big.fixed" and isinstance(unit, ast.FunctionDef)
    sites = change_sites(tree, ref, ws, "big")
    assert sites and {s.unit for s in sites} == {"big:Big.fixed"}
    muts = [m for s in sites if (m := render(ref, tree, s, "big.py"))]
    assert {m.lineno for m in muts} == {ref.splitlines().index("        return x * 2 + 1") + 1}


def test_sample_depends_on_the_code_only(tmp_path: Path) -> None:
    case = _case("weak-type-only")
    a = adequacy.all_mutants(case.write(tmp_path, "id-one"))
    b = adequacy.all_mutants(case.write(tmp_path, "a-completely-different-id"))
    assert a == b and len(a) > 5
    assert adequacy.sample(a, 5) == adequacy.sample(b, 5)
    assert len({m.operator for m in adequacy.sample(a, 5)}) == 5  # spread over operators


def test_baselines_replace_the_body_and_keep_the_docstring(tmp_path: Path) -> None:
    task = _case("weak-truthy").write(tmp_path)
    cases = {desc: text for desc, _rel, text in adequacy.baselines(task)}
    assert len(cases) == len(adequacy.BASELINES)
    assert cases["solve returns its first argument"] == 'def solve(n):\n    """n factorial."""\n    return n\n'
    assert cases["solve returns a copy of its first argument"].endswith("    return __import__('copy').copy(n)\n")
    assert adequacy.baselines(task, skip={"solution.py:solve"}) == []


def test_a_function_that_starts_with_guards_gets_each_baseline_behind_them(tmp_path: Path) -> None:
    task = _case("weak-guards-tiny-body").write(tmp_path)
    cases = {desc: text for desc, _rel, text in adequacy.baselines(task)}
    behind = cases["solve returns a copy of its first argument behind its guards"]
    assert behind.count("raise Rejected") == 5 and behind.endswith("    return __import__('copy').copy(xs)\n")
    assert "raise Rejected" not in cases["solve returns a copy of its first argument"]
    assert not any("behind its guards" in d for d, _r, _t in adequacy.baselines(_case("weak-truthy").write(tmp_path)))


def test_output_mutants_weaken_each_return_at_its_first_and_last_site(tmp_path: Path) -> None:
    task = _case("weak-length-only-primes").write(tmp_path)
    first, last = adequacy.output_mutants(task)
    assert (first.operator, last.operator) == ("weaken_result_first", "weaken_result_last")
    for m, want in ((first, [3, 3, 5, 7, 11]), (last, [2, 3, 5, 7, 12])):
        ns: dict = {}
        exec(compile(m.source, "solution.py", "exec"), ns)
        assert ns["solve"](5) == want  # same type and length, one value changed


def test_the_weakening_keeps_type_and_length_and_refuses_what_it_cannot_change(tmp_path: Path) -> None:
    ns: dict = {}
    exec(adequacy.PERTURB_SOURCE, ns)
    weaken = ns[adequacy.PERTURB]
    point = collections.namedtuple("point", "x y")
    for value, want in [
        (7, 8),
        (True, False),
        ("khoor", "khoox"),
        ((1, "ab"), (1, "ax")),
        (point(1, 2), point(1, 3)),
        ({"a": [1, 2]}, {"a": [1, 3]}),
        (b"ab", b"ac"),
    ]:
        got = weaken(value, -1)
        assert got == want and type(got) is type(value)
    assert list(weaken(iter([1, 2]), 0)) == [2, 2]
    for value in (None, [], "", {}):  # unchanged: a test with an empty case must not kill every output mutant
        assert weaken(value, 0) == value


def test_a_return_of_an_empty_literal_is_no_output_site(tmp_path: Path) -> None:
    case = _case("weak-length-only-primes")
    early = case.reference.replace("    primes = []\n", "    if n == 0:\n        return []\n    primes = []\n")
    task = Case(**{**case.__dict__, "reference": early}).write(tmp_path)
    assert {m.line for m in adequacy.output_mutants(task)} == {early.splitlines().index("    return primes") + 1}


def test_a_result_the_tests_only_drop_is_outside_the_contract(tmp_path: Path) -> None:
    case = _case("honest-side-effect-unspecified-return")
    assert adequacy.results_outside_contract(case.write(tmp_path)) == ["solve"]
    assert adequacy.output_mutants(case.write(tmp_path)) == []
    for i, used in enumerate(
        (
            "    assert solve(tags, 'z') is tags\n",  # compared
            "    out = solve(tags, 'z')\n",  # kept
            "    check = list(map(solve, [tags], ['z']))\n",  # passed around
            "    getattr(solution, 'solve')(tags, 'z')\n",  # named by a string
        )
    ):
        tests = case.tests.replace("def test_not_a_list", f"def test_more():\n    tags = []\n{used}\n\ndef test_not")
        task = Case(**{**case.__dict__, "tests": tests}).write(tmp_path, f"used-{i}")
        assert adequacy.results_outside_contract(task) == [], used
        assert adequacy.output_mutants(task), used


def test_a_result_the_tests_look_at_stays_in_the_contract_whatever_the_statement_says(tmp_path: Path) -> None:
    task = _case("weak-unspecified-return-length-only").write(tmp_path)
    assert adequacy.results_outside_contract(task) == []
    assert len(adequacy.output_mutants(task)) == 2
