"""Mutation operators: every kind fires on real code, edits only its node, and
yields code that parses."""

from __future__ import annotations

import ast
import difflib
import random

import pytest

from touchstone.tasks.mutate import OPERATORS, changed_functions, compile_error, mutations, operator_table

SAMPLE = '''\
import math  # a comment that must survive


def clip(xs, lo, hi):
    """Docstring constants like 1 < 2 are never mutated."""
    if not xs:
        return []
    out = []
    for i in range(len(xs) - 1):
        x = xs[i] * 2 + lo
        if x < lo or x > hi:
            continue
        out.append(max(lo, x))
    total = 0
    total += len(out)
    return out[1:] if total == 3 else True


class Box:
    @staticmethod
    def area(w, h):
        return math.pow(w, h) - w % 3
'''


def changed_lines(before: str, after: str) -> list[str]:
    return [
        l
        for l in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
        if l[:1] in "+-" and l[:3] not in ("+++", "---")
    ]


def test_every_operator_kind_fires_and_edits_one_spot() -> None:
    found = list(mutations(SAMPLE, "sample.py", "sample"))
    assert {m.operator for m in found} == set(OPERATORS) and len(OPERATORS) >= 10
    for m in found:
        ast.parse(m.source)
        assert "# a comment that must survive" in m.source
        assert '"""Docstring constants like 1 < 2 are never mutated."""' in m.source
        diff = changed_lines(SAMPLE, m.source)
        assert 1 <= len(diff) <= 3, (m.key, diff)  # one statement touched
    assert {m.unit for m in found} == {"sample:clip", "sample:Box.area"}


def test_operators_restrict_the_kinds_of_bug() -> None:
    only = list(mutations(SAMPLE, "sample.py", "sample", operators=operator_table(["swap_arguments", "arith_swap"])))
    assert {m.operator for m in only} == {"swap_arguments", "arith_swap"}
    every = [m for m in mutations(SAMPLE, "sample.py", "sample") if m.operator in ("swap_arguments", "arith_swap")]
    assert sorted(m.source for m in only) == sorted(m.source for m in every)
    assert operator_table([]) == operator_table(None) == OPERATORS


def test_an_unknown_operator_is_named() -> None:
    with pytest.raises(ValueError, match="unknown mutation operator.*swap_args.*known: .*swap_arguments"):
        operator_table(["swap_arguments", "swap_args"])


def test_specific_rewrites() -> None:
    by_op = {}
    for m in mutations(SAMPLE, "sample.py", "sample"):
        by_op.setdefault(m.operator, []).append("\n".join(changed_lines(SAMPLE, m.source)))
    assert any("+        if x >= lo or x > hi:" in d for d in by_op["comparison_flip"])
    assert any("+        if x <= lo or x > hi:" in d for d in by_op["comparison_boundary"])
    assert any("range(len(xs) - 1 + 1)" in d or "range(len(xs) - 2)" in d for d in by_op["off_by_one"])
    assert any("+        if x < lo and x > hi:" in d for d in by_op["bool_op_swap"])
    assert any("xs[i] * 2 - lo" in d for d in by_op["arith_swap"])
    assert any("+    if xs:" in d for d in by_op["negate_condition"])
    assert any(d == "-    total += len(out)" for d in by_op["remove_statement"])
    assert any("+    total = 1" in d for d in by_op["change_constant"])
    assert any("math.pow(h, w)" in d for d in by_op["swap_arguments"])
    assert any("+        return None" in d for d in by_op["change_return_value"])
    assert any(d.startswith("-    if not xs:\n-        return []") for d in by_op["remove_early_return"])


def test_decorated_and_nested_scopes_mutate() -> None:
    src = "import functools\n\n\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"
    found = list(mutations(src, "f.py", "f"))
    assert {"comparison_flip", "arith_swap", "change_constant"} <= {m.operator for m in found}
    assert all(
        m.source.startswith("import functools\n\n\n@functools.lru_cache(maxsize=None)\ndef fib(n):") for m in found
    )


def test_shuffled_order_is_deterministic() -> None:
    a = [m.key for m in mutations(SAMPLE, "s.py", "s", rng=random.Random(7))]
    b = [m.key for m in mutations(SAMPLE, "s.py", "s", rng=random.Random(7))]
    assert a == b and a != [m.key for m in mutations(SAMPLE, "s.py", "s")]


def test_changed_functions_and_compile_error() -> None:
    mutated = SAMPLE.replace("w % 3", "w % 4")
    assert changed_functions(SAMPLE, mutated) == {"Box.area"}
    assert changed_functions(SAMPLE, None) == {"clip", "Box.area"}
    assert compile_error(SAMPLE, "s.py") is None
    assert "SyntaxError" in compile_error("def f():\n    break\n", "s.py")
