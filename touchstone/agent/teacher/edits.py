"""Candidate repairs: single edits of one function (inverse AST mutations),
ranked by how near they are to a traceback line and how much more the edited
line looks like the code around it. Sites are the mutation proposer's
(`touchstone.tasks.mutate.function_sites`), so the teacher searches exactly
where a mutation task's bug can be."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from touchstone.tasks.mutate import OPERATORS, Edit, Operator, apply_edit, function_sites, functions, int_value
from touchstone import pyast


def _drop_one(parent, field_name, index, node) -> Iterator[ast.AST]:
    """`x + 1` / `x - 1` -> `x`: the commonest off-by-one fix."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and int_value(node.right) == 1:
        yield node.left


def _shift_index(parent, field_name, index, node) -> Iterator[ast.AST]:
    """An index, slice bound or range() argument moved by one."""
    in_range = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range"
    in_slice = isinstance(parent, ast.Slice) and field_name in ("lower", "upper")
    in_index = isinstance(parent, ast.Subscript) and field_name == "slice" and not isinstance(node, ast.Slice)
    if isinstance(node, ast.expr) and (in_range or in_slice or in_index) and not isinstance(node, ast.Tuple):
        for op in (ast.Sub(), ast.Add()):
            yield ast.BinOp(node, op, ast.Constant(1))


def _constant_step(parent, field_name, index, node) -> Iterator[ast.AST]:
    """Numeric literals one step off, booleans flipped."""
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        for delta in (-1, 1):
            if node.value + delta >= 0:
                yield ast.Constant(node.value + delta)


_MORE_ARITH = {ast.Mult: (ast.Div, ast.Pow, ast.Add), ast.FloorDiv: (ast.Mod, ast.Div), ast.Div: (ast.FloorDiv,)}


def _arith_more(parent, field_name, index, node) -> Iterator[ast.AST]:
    if isinstance(node, ast.BinOp):
        for op in _MORE_ARITH.get(type(node.op), ()):
            yield ast.BinOp(node.left, op(), node.right)


# Edits tried by the teacher, most plausible first for a given site. The
# mutation operators that are their own inverse are reused from the proposer's
# library; the others get an inverse here.
REPAIR_OPERATORS: dict[str, Operator] = {
    "comparison_boundary": OPERATORS["comparison_boundary"],
    "drop_plus_minus_one": _drop_one,
    "comparison_flip": OPERATORS["comparison_flip"],
    "swap_arguments": OPERATORS["swap_arguments"],
    "constant_step": _constant_step,
    "bool_op_swap": OPERATORS["bool_op_swap"],
    "negate_condition": OPERATORS["negate_condition"],
    "arith_swap": OPERATORS["arith_swap"],
    "arith_other": _arith_more,
    "shift_index": _shift_index,
}
_RANK = {name: i for i, name in enumerate(REPAIR_OPERATORS)}

# Edits to try first when the failure raised this exception: a TypeError or
# AttributeError is typically an argument of the wrong kind (swapped arguments,
# an operator on the wrong types), an IndexError an index one off.
ERROR_PRIORS: dict[str, tuple[str, ...]] = {
    "TypeError": ("swap_arguments", "arith_swap"),
    "AttributeError": ("swap_arguments",),
    "IndexError": ("shift_index", "drop_plus_minus_one", "constant_step"),
}


def preferred_operators(errors: list[str]) -> set[str]:
    return {op for e in errors for op in ERROR_PRIORS.get(e, ())}


@dataclass(frozen=True)
class EditCandidate:
    path: str
    qualname: str
    operator: str
    lineno: int
    source: str  # whole file after the edit
    rank: tuple = ()  # sort key within and across functions (smaller: try sooner)


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def trigrams(text: str) -> Counter:
    toks = _TOKEN_RE.findall(text)
    return Counter(zip(toks, toks[1:], toks[2:]))


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines `a` and `b` share at their start, and then at their end."""
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    return pre, suf


def naturalness_gain(before: str, after: str, corpus: Counter) -> float:
    """How much more the changed lines look like the rest of the code after the edit:
    an injected bug tends to be the odd one out among similar lines (`insert(x, 0)`
    among many `insert(0, x)`, `s[2:]` among many `s[1:]`). `corpus` counts the
    trigrams of the code read so far, the changed lines included."""
    a, b = before.splitlines(True), after.splitlines(True)
    pre, suf = _common_ends(a, b)
    old, new = trigrams("".join(a[pre : len(a) - suf])), trigrams("".join(b[pre : len(b) - suf]))

    def familiarity(grams: Counter) -> float:
        return sum(n * math.log1p(max(corpus[g] - old[g], 0)) for g, n in grams.items())

    return familiarity(new) - familiarity(old)


def edit_candidates(
    source: str,
    path: str,
    qualname: str,
    hot_lines: set[int],
    preferred: set[str] = frozenset(),
    corpus: Counter | None = None,
) -> list[EditCandidate]:
    """Single-edit repairs of one function, lines implicated by a traceback first,
    then by distance to them, then edits that make the code more like the rest of
    `corpus`, then operators the exception points to, then by operator plausibility."""
    tree = pyast.parse(source)
    func = dict(functions(tree)).get(qualname)
    if func is None:
        return []
    found: dict[str, EditCandidate] = {}
    for parent, field_name, index, node in function_sites(func):
        for name, op in REPAIR_OPERATORS.items():
            for new in op(parent, field_name, index, node):
                text = apply_edit(source, tree, Edit(parent, field_name, index, node, new))
                if text is not None and text != source and text not in found:
                    found[text] = EditCandidate(path, qualname, name, node.lineno, text)

    corpus = corpus if corpus is not None else trigrams(source)

    def ranked(c: EditCandidate) -> EditCandidate:
        distance = min((abs(c.lineno - h) for h in hot_lines), default=0)
        gain = naturalness_gain(source, c.source, corpus)
        key = (distance, -round(gain, 1) if gain > 0 else 0.0, c.operator not in preferred, _RANK[c.operator], c.lineno)
        return dataclasses.replace(c, rank=key)

    return sorted(map(ranked, found.values()), key=lambda c: c.rank)


def line_edit(current: str, target: str) -> tuple[str, str]:
    """(old, new) for one `str_replace` turning `current` into `target`: the
    differing lines, widened by whole lines until `old` occurs exactly once."""
    a, b = current.splitlines(keepends=True), target.splitlines(keepends=True)
    pre, suf = _common_ends(a, b)
    lo, hi_a, hi_b = pre, len(a) - suf, len(b) - suf
    while True:
        old = "".join(a[lo:hi_a])
        if old and current.count(old) == 1:
            return old, "".join(b[lo:hi_b])
        if lo == 0 and hi_a == len(a):
            return current, target  # whole file; str_replace still applies
        if lo > 0:
            lo -= 1
        if hi_a < len(a):
            hi_a += 1
            hi_b += 1
