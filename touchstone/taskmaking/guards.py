"""The reference's own guards, so that the adequacy check does not credit the
tests with what the guards noticed.

A guard is a statement whose only possible effect is raising: `raise`, `assert`,
a bare non-call expression (`1 / 0`, `{}[key]`), a call of a function made only
of guards (`_require(ok, "why")`), or an `if` made only of guards. The guard
scope is what the reference changed (the functions or statements its changed
lines sit in, `mutate.changed_units`) and the same file's top-level functions
they call, transitively (a guard helper the stub already holds
counts). Removing the guards also removes the values only they used (a result
recomputed to check it): with the guards gone, that code does nothing.

- `guard_lines`: where the guards are, to tell a test that died of a guard's
  exception (raised at a guard line) from one whose own check failed;
- `unguarded`: the file without its guards, to run a mutant again without
  them, and to tell a mutant of the guards alone (it equals the unguarded
  reference) from one of the behaviour.

Not covered: a guard that is an ordinary call (`int("not a number")`) looks like
behaviour and is treated as such.
"""

from __future__ import annotations

import ast
import copy
from functools import lru_cache

from touchstone.tasks.mutate import changed_units
from touchstone import pyast

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def body_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """A function's statements after its docstring."""
    first = fn.body[0]
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    return fn.body[1:] if doc else fn.body


def _is_guard(stmt: ast.stmt, funcs: set[str]) -> bool:
    if isinstance(stmt, (ast.Raise, ast.Assert)):
        return True
    if isinstance(stmt, ast.Expr):
        value = stmt.value
        if isinstance(value, ast.Call):
            return isinstance(value.func, ast.Name) and value.func.id in funcs
        # evaluated for nothing: raising is all it can do (a docstring cannot)
        return not isinstance(value, (ast.Await, ast.Yield, ast.YieldFrom, ast.Constant))
    if isinstance(stmt, ast.If):
        return all(_is_guard(s, funcs) for s in stmt.body + stmt.orelse)
    return False


def _guard_functions(tree: ast.Module) -> set[str]:
    """Top-level functions made only of guards: calling one can only raise."""
    funcs: set[str] = set()
    grew = True
    while grew:
        new = {
            n.name
            for n in tree.body
            if isinstance(n, _DEFS)
            and n.name not in funcs
            and body_of(n)
            and all(_is_guard(s, funcs) for s in body_of(n))
        }
        funcs |= new
        grew = bool(new)
    return funcs


def leading_guards(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """How many of `fn`'s first statements (after its docstring) are guards."""
    funcs, n = _guard_functions(tree), 0
    for stmt in body_of(fn):
        if not _is_guard(stmt, funcs):
            break
        n += 1
    return n


def _scope(tree: ast.Module, source: str, workspace: str | None) -> list[ast.stmt]:
    """What the change touched (`changed_units`: the functions or statements its
    changed lines sit in) and the file's top-level functions they call, transitively."""
    defs = {n.name: n for n in tree.body if isinstance(n, _DEFS)}
    todo, out = [unit for unit, _name in changed_units(tree, source, workspace)], []
    while todo:
        node = todo.pop()
        if any(node is seen for seen in out):
            continue
        out.append(node)
        calls = (c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name))
        todo += [defs[name] for name in calls if name in defs]
    return out


def _guards(tree: ast.Module, scope: list[ast.stmt]) -> list[ast.stmt]:
    """The outermost guard statements in `scope`."""
    funcs, found = _guard_functions(tree), []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.stmt) and _is_guard(node, funcs):
            found.append(node)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)

    for top in scope:
        visit(top)
    return found


def guard_lines(source: str, workspace: str | None) -> set[int]:
    """Line numbers of the guards of `source` (a reference file or a mutant of it)."""
    try:
        tree = pyast.parse_shared(source)
    except SyntaxError:
        return set()
    stmts = _guards(tree, _scope(tree, source, workspace))
    return {n for g in stmts for n in range(g.lineno, (g.end_lineno or g.lineno) + 1)}


class _Replace(ast.NodeTransformer):
    """Replace the statements in `drop` (by identity) with `pass`."""

    def __init__(self, drop: set[int]):
        self.drop = drop

    def visit(self, node: ast.AST) -> ast.AST:
        if id(node) in self.drop:
            return ast.copy_location(ast.Pass(), node)
        return super().visit(node)


def _dead_stores(fn: ast.AST) -> set[int]:
    """Assignments in `fn` to plain names it never reads (nor declares global/nonlocal)."""
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    read |= {name for n in ast.walk(fn) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    return {
        id(n)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) and t.id not in read for t in n.targets)
    }


def _strip(tree: ast.Module, scope: list[ast.stmt]) -> tuple[list[ast.stmt], set[int]]:
    """(scope, dropped) : the statements of `scope` (edited in place) with their guards
    replaced by `pass` and the assignments only they read dropped; and the ids of the
    guards dropped (a top-level one is for the caller to replace in `tree.body`)."""
    drop = {id(g) for g in _guards(tree, scope)}
    # only the scope is visited: the rest of a big module is left as parsed
    scope = [ast.copy_location(ast.Pass(), stmt) if id(stmt) in drop else _Replace(drop).visit(stmt) for stmt in scope]
    for fn in (n for top in scope for n in ast.walk(top) if isinstance(n, _DEFS)):
        while dead := _dead_stores(fn):  # a store feeding only a dropped store goes next
            _Replace(dead).visit(fn)
    for stmt in scope:
        ast.fix_missing_locations(stmt)
    return scope, drop


@lru_cache(maxsize=32)
def unguarded(source: str, workspace: str | None) -> str:
    """`source` without the guards of its guard scope, nor the assignments only they
    read (normalized through ast.unparse): the file to run."""
    tree = pyast.parse(source)  # a tree of its own: edited in place
    _, drop = _strip(tree, _scope(tree, source, workspace))
    tree.body = [ast.copy_location(ast.Pass(), stmt) if id(stmt) in drop else stmt for stmt in tree.body]
    return ast.unparse(tree)


@lru_cache(maxsize=64)  # the reference's is compared with every mutant's
def _unguarded_scope(source: str, workspace: str | None) -> str:
    """The guard scope alone, unguarded and unparsed: what a mutant of the changed
    code can differ in (the rest of a big module is never unparsed). The module's
    shared parse is read; only copies of the scope are edited."""
    tree = pyast.parse_shared(source)
    scope, _drop = _strip(tree, [copy.deepcopy(stmt) for stmt in _scope(tree, source, workspace)])
    return "\n\n".join(ast.unparse(stmt) for stmt in scope)


def only_guards_changed(mutant: str, reference: str, workspace: str | None) -> bool:
    """Does a mutant of `reference` (an edit inside its changed code) differ from it
    in its guards only?"""
    return _unguarded_scope(mutant, workspace) == _unguarded_scope(reference, workspace)


def died_of_guards(failed: dict[str, str], raised_at: dict[str, str], lines: dict[str, set[int]]) -> bool:
    """Did every failed test die of an exception raised at a guard line (`lines`: rel
    path -> guard lines of the file as run)? A test's own assert is raised in the test file."""

    def at_guard(nodeid: str) -> bool:
        path, _, line = raised_at.get(nodeid, "").rpartition(":")
        return line.isdigit() and int(line) in lines.get(path, ())

    return bool(failed) and all(at_guard(t) for t in failed)
