"""AST-level mutation operators (SWE-smith style), shared by the mutation proposer
(one injected bug per task) and the adequacy check (mutants of the reference's
changed code must be killed by the hidden tests).

A mutation edits the source *text* of one node only (a span splice, or deleting
the lines of one statement), so the rest of the file keeps its formatting and
comments; the result is re-parsed and must equal the intended AST, otherwise the
site is skipped (operator precedence, odd layouts).
"""

from __future__ import annotations

import ast
import copy
import difflib
import random
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from touchstone import pyast

# -- the edit an operator proposes ----------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """Replace `node` (reached as parent.field[index]) with `new`, or delete the
    statement when `new` is None."""

    parent: ast.AST
    field: str
    index: int | None
    node: ast.AST
    new: ast.AST | None


@dataclass(frozen=True)
class Mutation:
    operator: str
    path: str  # file, relative to the project root
    unit: str  # "module:Qualified.name" of the enclosing function
    lineno: int
    source: str  # the whole mutated file

    @property
    def key(self) -> str:
        return f"{self.unit}:{self.operator}:{self.lineno}"


def _children(parent: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for field, value in ast.iter_fields(parent):
        if isinstance(value, ast.AST):
            yield field, None, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield field, i, item


def int_value(node: ast.AST) -> int | None:
    """The value of an int literal (`3`, `-1`), else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if type(value) is int else None


def _plus(node: ast.expr, delta: int) -> ast.expr:
    value = int_value(node)
    if value is not None:
        return (
            ast.Constant(value + delta)
            if value + delta >= 0
            else ast.UnaryOp(ast.USub(), ast.Constant(-(value + delta)))
        )
    op = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(copy.deepcopy(node), op, ast.Constant(abs(delta)))


# -- operators: each maps (parent, field, index, node) to replacement nodes ------------------

_FLIP = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}

Site = tuple[ast.AST, str, int | None, ast.AST]  # parent, field, index, node
Operator = Callable[[ast.AST, str, int | None, ast.AST], Iterator[ast.AST | None]]


def _compare(table: dict) -> Operator:
    def op(parent, field, index, node):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in table:
            yield ast.Compare(node.left, [table[type(node.ops[0])]()], node.comparators)

    return op


def _off_by_one(parent, field, index, node):
    in_range = (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id == "range"
        and field == "args"
    )
    in_slice = isinstance(parent, ast.Slice) and field in ("lower", "upper")
    in_index = (
        isinstance(parent, ast.Subscript)
        and field == "slice"
        and (int_value(node) is not None or isinstance(node, ast.BinOp) and int_value(node.right) is not None)
    )
    if isinstance(node, ast.expr) and (in_range or in_slice or in_index):
        yield _plus(node, 1 if (int_value(node) or 0) >= 0 else -1)


def _bool_op(parent, field, index, node):
    if isinstance(node, ast.BoolOp):
        yield ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, (ast.JoinedStr, ast.Constant)) and isinstance(getattr(node, "value", ""), str)


def _arith(parent, field, index, node):
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH and not (_is_str(node.left) or _is_str(node.right)):
        yield ast.BinOp(node.left, _ARITH[type(node.op)](), node.right)
    elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
        yield ast.AugAssign(node.target, _ARITH[type(node.op)](), node.value)


def _negate(parent, field, index, node):
    if field == "test" and isinstance(parent, (ast.If, ast.While, ast.IfExp)):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node.operand
        else:
            yield ast.UnaryOp(ast.Not(), node)


def _removable_slot(parent, field, index) -> bool:
    body = getattr(parent, field, None)
    return index is not None and isinstance(body, list) and len(body) >= 2 and field in ("body", "orelse", "finalbody")


def _remove_statement(parent, field, index, node):
    if _removable_slot(parent, field, index) and (
        isinstance(node, (ast.Assign, ast.AugAssign)) or isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    ):
        yield None


def _constant(parent, field, index, node):
    if isinstance(parent, ast.Slice) or isinstance(parent, ast.Subscript) and field == "slice":
        return  # off_by_one's territory
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield ast.Constant(node.value + 1 if node.value != 1 else 0)


def _swap_args(parent, field, index, node):
    if (
        isinstance(node, ast.Call)
        and len(node.args) >= 2
        and not any(isinstance(a, ast.Starred) for a in node.args[:2])
    ):
        a, b = node.args[0], node.args[1]
        if ast.dump(a) != ast.dump(b):
            yield ast.Call(node.func, [b, a, *node.args[2:]], node.keywords)


def _return_value(parent, field, index, node):
    if isinstance(node, ast.Return) and node.value is not None:
        v = node.value
        if isinstance(v, ast.Constant) and type(v.value) is bool:
            yield ast.Return(ast.Constant(not v.value))
        elif not (isinstance(v, ast.Constant) and v.value is None):
            yield ast.Return(ast.Constant(None))


def _early_return(parent, field, index, node):
    body = getattr(parent, field, None)
    if (
        _removable_slot(parent, field, index)
        and isinstance(node, ast.If)
        and not node.orelse
        and isinstance(node.body[-1], ast.Return)
        and index < len(body) - 1
    ):
        yield None


OPERATORS: dict[str, Operator] = {
    "comparison_flip": _compare(_FLIP),
    "comparison_boundary": _compare(_BOUNDARY),
    "off_by_one": _off_by_one,
    "bool_op_swap": _bool_op,
    "arith_swap": _arith,
    "negate_condition": _negate,
    "remove_statement": _remove_statement,
    "change_constant": _constant,
    "swap_arguments": _swap_args,
    "change_return_value": _return_value,
    "remove_early_return": _early_return,
}


def _string(parent, field, index, node):
    """A changed string literal (a table's value, a message the tests compare).
    Adequacy only: the proposer's bugs stay in code, not in text."""
    if isinstance(node, ast.Constant) and type(node.value) is str and not isinstance(parent, (ast.Expr, ast.JoinedStr)):
        yield ast.Constant(node.value + "~" if node.value else "~")


# the adequacy check's operators: the proposer's plus the ones a table or message fix needs
ADEQUACY_OPERATORS: dict[str, Operator] = {**OPERATORS, "change_string": _string}


# -- where to mutate --------------------------------------------------------------------


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of top-level functions and methods of top-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{sub.name}", sub


def function_sites(func: ast.AST) -> Iterator[Site]:
    """Every (parent, field, index, node) inside a function's body, docstring
    excluded, outer nodes first: where the proposer injects a bug, and so where
    the teacher looks for one (touchstone/agent/teacher/edits.py)."""
    body = func.body
    start = 1 if body and isinstance(body[0], ast.Expr) and _is_str(body[0].value) else 0
    stack: list[Site] = [(func, "body", i, body[i]) for i in range(start, len(body))]
    while stack:
        site = stack.pop(0)
        yield site
        node = site[3]
        if isinstance(node, (ast.JoinedStr, ast.Lambda)):
            continue  # f-string internals have no reliable positions
        stack.extend((node, f, i, child) for f, i, child in _children(node))


# -- applying an edit to the text -------------------------------------------------------


def _line_offsets(lines: list[bytes]) -> list[int]:
    offsets, total = [0], 0
    for line in lines:
        total += len(line)
        offsets.append(total)
    return offsets


def _splice(source: str, edit: Edit, parens: bool) -> str | None:
    data = source.encode()
    lines = data.splitlines(keepends=True)
    offsets = _line_offsets(lines)
    node = edit.node
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    if edit.new is None:  # delete whole lines; the statement must own them
        before = data[offsets[node.lineno - 1] : start]
        after = data[end : offsets[node.end_lineno]]
        if before.strip() or after.strip() and not after.strip().startswith(b"#"):
            return None
        return (data[: offsets[node.lineno - 1]] + data[offsets[node.end_lineno] :]).decode()
    text = ast.unparse(edit.new)
    if "\n" in text and not isinstance(edit.new, ast.stmt):
        return None
    if parens:
        text = f"({text})"
    return (data[:start] + text.encode() + data[end:]).decode()


def _top_statement(tree: ast.Module, node: ast.AST) -> ast.stmt | None:
    """The top-level statement whose lines contain `node`."""
    for stmt in tree.body:
        if stmt.lineno <= node.lineno and node.end_lineno <= stmt.end_lineno:
            return stmt
    return None


def _expected_dump(target: ast.AST, edit: Edit) -> str:
    """ast.dump of `target` with the edit applied in place, then undone."""
    holder = getattr(edit.parent, edit.field)
    if edit.index is None:
        setattr(edit.parent, edit.field, edit.new)
        try:
            return ast.dump(target)
        finally:
            setattr(edit.parent, edit.field, holder)
    saved = list(holder)
    if edit.new is None:
        del holder[edit.index]
    else:
        holder[edit.index] = edit.new
    try:
        return ast.dump(target)
    finally:
        holder[:] = saved


def apply_edit(source: str, tree: ast.Module, edit: Edit, unit: ast.stmt | None = None) -> str | None:
    """The mutated file text, or None when no splice reproduces the intended AST.
    The splice touches only lines of the statement holding the node (`unit`, a
    statement at any depth, else the top-level one), so only that statement's
    new lines are re-parsed and compared: a mutant of a method of a big class
    costs as much as one of a small function."""
    stmt = unit or _top_statement(tree, edit.node)
    want = _expected_dump(tree if stmt is None else stmt, edit)
    for parens in (False, True):
        text = _splice(source, edit, parens)
        if text is None:
            return None
        if stmt is None:
            try:
                if ast.dump(pyast.parse(text)) == want:
                    return text
            except SyntaxError:
                pass
            continue
        delta = len(text.splitlines()) - len(source.splitlines())
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        lines = text.splitlines()[start - 1 : stmt.end_lineno + delta]
        # an indented statement parses alone inside a block of its own indentation
        snippet = ("if 1:\n" if stmt.col_offset else "") + "\n".join(lines) + "\n"
        try:
            new = pyast.parse(snippet)
        except SyntaxError:
            continue
        body = new.body[0].body if stmt.col_offset and new.body else new.body
        if len(new.body) == 1 and len(body) == 1 and ast.dump(body[0]) == want:
            return text
    return None


def operator_table(names: list[str] | None) -> dict[str, Operator]:
    """The mutation operators called `names` (None or empty: all of them); an unknown name is a ValueError."""
    unknown = sorted(set(names or []) - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown mutation operator(s) {', '.join(unknown)}; known: {', '.join(OPERATORS)}")
    return {name: op for name, op in OPERATORS.items() if not names or name in names}


def mutations(
    source: str,
    path: str,
    module: str,
    only: set[str] | None = None,
    rng: random.Random | None = None,
    operators: dict[str, Operator] = OPERATORS,
) -> Iterator[Mutation]:
    """Single-edit mutations of the functions of one file (`only`: qualified names
    to restrict to; `operators`: the kinds of bug, `operator_table`). Sites are
    enumerated cheaply, shuffled by `rng` (when given), and rendered lazily, so a
    consumer pays only for the mutations it takes."""
    tree = pyast.parse(source)
    candidates = [
        (qualname, name, Edit(parent, field, index, node, new))
        for qualname, func in functions(tree)
        if only is None or qualname in only
        for parent, field, index, node in function_sites(func)
        for name, op in operators.items()
        for new in op(parent, field, index, node)
    ]
    if rng is not None:
        rng.shuffle(candidates)
    for qualname, name, edit in candidates:
        text = apply_edit(source, tree, edit)
        if text is not None and text != source:
            yield Mutation(name, path, f"{module}:{qualname}", edit.node.lineno, text)


def changed_statements(reference: str, workspace: str | None) -> list[int]:
    """Indices of the reference's top-level statements (functions, classes with
    their nested classes, module-level tables and constants) that the workspace
    version lacks verbatim (all of them when it has no such file or it does not parse)."""
    return list(_changed_statements(reference, workspace))


@lru_cache(maxsize=16)  # asked by several checks of one task; dumping a big module's classes costs
def _changed_statements(reference: str, workspace: str | None) -> tuple[int, ...]:
    ref = pyast.parse_shared(reference)
    try:
        old = {ast.dump(s) for s in pyast.parse_shared(workspace).body} if workspace is not None else set()
    except SyntaxError:
        old = set()
    return tuple(i for i, stmt in enumerate(ref.body) if ast.dump(stmt) not in old)


def _statement_sites(stmt: ast.stmt) -> Iterator[Site]:
    """Every site below one top-level statement, at any depth (methods of nested
    classes, values of a module-level table); docstrings are left alone."""
    stack: list[Site] = [(stmt, f, i, c) for f, i, c in _children(stmt)]
    while stack:
        site = stack.pop(0)
        parent, field, index, node = site
        if isinstance(node, ast.Expr) and _is_str(node.value) and index == 0 and field == "body":
            continue  # a docstring
        yield site
        if not isinstance(node, (ast.JoinedStr, ast.Lambda)):
            stack.extend((node, f, i, c) for f, i, c in _children(node))


def changed_lines(reference: str, workspace: str | None) -> set[int]:
    """1-based reference lines in changed (replaced or inserted) line runs."""
    return _line_changes(reference, workspace)[0]


@lru_cache(maxsize=64)  # the reference's, asked by every check; a mutant's, by guards and coverage
def _line_changes(reference: str, workspace: str | None) -> tuple[frozenset[int], frozenset[int]]:
    """(1-based reference lines replaced or inserted, reference lines on either side of
    a deleted run). The common head and tail are cut off before diffing: a fix in a
    6,000-line module diffs a few lines, not the module."""
    new = reference.splitlines()
    old = workspace.splitlines() if workspace is not None else []
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(a=old[head : len(old) - tail], b=new[head : len(new) - tail], autojunk=False)
    changed, deleted = set(), set()
    for tag, _a, _b, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(head + j1 + 1, head + j2 + 1))
        elif tag == "delete" and workspace is not None:
            deleted.update((head + j1, head + j1 + 1))
    return frozenset(changed), frozenset(deleted)


_BODIES = ("body", "orelse", "finalbody", "handlers")


def _unit_at(tree: ast.Module, line: int) -> tuple[ast.stmt, str] | None:
    """(statement, qualified name) of the smallest unit that holds `line`: the
    outermost function around it, else the innermost statement holding it
    (a class attribute, a module-level table, a class header: the class)."""
    found, names, nodes = None, [], list(tree.body)
    while True:
        stmt = next(
            (n for n in nodes if isinstance(n, ast.stmt) and _first_line(n) <= line <= n.end_lineno),
            None,
        )
        if stmt is None:
            return found
        name = getattr(stmt, "name", None)
        names = names + [name] if name else names
        found = (stmt, ".".join(names) or f"<line {stmt.lineno}>")
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return found
        nodes = [c for f in _BODIES for c in getattr(stmt, f, []) or []]
        nodes = [b for c in nodes for b in (c.body if isinstance(c, ast.ExceptHandler) else [c])]


def _first_line(stmt: ast.stmt) -> int:
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])


def changed_units(tree: ast.Module, reference: str, workspace: str | None) -> list[tuple[ast.stmt, str]]:
    """(statement, qualified name) of the smallest units the change touches (`_unit_at`
    of every changed line of `reference`, parsed as `tree`), outermost first, none
    inside another: what the gold patch changed, not the class around it. Every
    top-level statement when the file is new."""
    if workspace is None:
        return [(s, getattr(s, "name", f"<line {s.lineno}>")) for s in tree.body]
    units: dict[int, tuple[ast.stmt, str]] = {}
    changed, deleted = _line_changes(reference, workspace)
    for line in sorted(changed | deleted):
        if (unit := _unit_at(tree, line)) is not None:
            units.setdefault(id(unit[0]), unit)
    spans = sorted(units.values(), key=lambda u: (_first_line(u[0]), -u[0].end_lineno))
    out: list[tuple[ast.stmt, str]] = []
    for stmt, name in spans:
        if not any(_first_line(o) <= _first_line(stmt) and stmt.end_lineno <= o.end_lineno for o, _ in out):
            out.append((stmt, name))
    return out


def changed_source(reference: str, workspace: str | None) -> str:
    """Source of what `reference` changed from `workspace` (`mutate.changed_units`: the
    functions or statements its changed lines sit in; every statement of a new file)."""
    try:
        tree = pyast.parse_shared(reference)
    except SyntaxError:
        return reference
    return "\n\n".join(
        textwrap.dedent(ast.get_source_segment(reference, unit, padded=True) or "")  # a method parses alone
        for unit, _name in changed_units(tree, reference, workspace)
    )


@dataclass(frozen=True)
class MutationSite:
    """A mutation not yet rendered: cheap to list, rendered by `render` when picked."""

    operator: str
    unit: str  # "module:Qualified.name" of the enclosing unit
    lineno: int
    edit: Edit
    holder: ast.stmt  # the unit statement, re-parsed alone to check the splice


def change_sites(tree: ast.Module, reference: str, workspace: str | None, module: str) -> list[MutationSite]:
    """Every single-edit mutation site (adequacy operators) inside the units the
    change touches, in source order, unrendered."""
    out = []
    for stmt, name in changed_units(tree, reference, workspace):
        for parent, field, index, node in _statement_sites(stmt):
            for op_name, op in ADEQUACY_OPERATORS.items():
                for new in op(parent, field, index, node):
                    edit = Edit(parent, field, index, node, new)
                    out.append(MutationSite(op_name, f"{module}:{name}", node.lineno, edit, stmt))
    return out


def render(source: str, tree: ast.Module, site: MutationSite, path: str) -> Mutation | None:
    """The mutated file of a site, or None when no splice reproduces it."""
    text = apply_edit(source, tree, site.edit, site.holder)
    if text is None or text == source:
        return None
    return Mutation(site.operator, path, site.unit, site.lineno, text)


def changed_functions(reference: str, workspace: str | None) -> set[str]:
    """Qualified names of functions whose AST differs between two versions of a
    file (all of them when the workspace has no such file or it does not parse)."""
    ref = dict(functions(pyast.parse_shared(reference)))
    try:
        ws = dict(functions(pyast.parse_shared(workspace))) if workspace is not None else {}
    except SyntaxError:
        ws = {}
    return {name for name, node in ref.items() if name not in ws or ast.dump(ws[name]) != ast.dump(node)}


def module_name(path: str) -> str:
    """Dotted module of a project-relative .py path (`pkg/__init__.py` -> `pkg`)."""
    return path[:-3].replace("/", ".").removesuffix(".__init__")


def compile_error(source: str, path: str) -> str | None:
    """None when the file compiles, else the compiler's message. Compiled from the
    shared parse: validation's guard analysis reads the same mutant's tree next."""
    try:
        compile(pyast.parse_shared(source), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
