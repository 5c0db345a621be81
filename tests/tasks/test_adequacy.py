"""Adequacy pieces without the sandbox: mutation sites over every changed
top-level statement, a sample that ignores the task id, guard-only failures,
trivial baselines."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import CASES
from touchstone.taskmaking import adequacy
from touchstone.tasks.mutate import changed_statements, statement_mutations


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
    muts = statement_mutations(ref, "m.py", "m", [0, 1])
    assert {m.operator for m in muts} == {"change_constant", "change_string"} and all(m.lineno <= 2 for m in muts)


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
