"""Test adequacy: do the hidden tests pin the reference's behaviour down?

- Mutants: every mutation site (adequacy operators, `touchstone.tasks.mutate`)
  in what the reference changed: the function each changed line sits in (a
  method, not its class), else the statement (a module-level table, a class
  attribute); when there are more than `max_mutants`, a sample spread over
  operators with a fixed seed, so the choice depends on the code only, never on
  the task id. Sites are listed unrendered and sampled first; only the sampled
  ones are rendered, compiled and analysed. All picked are run; the full score
  is reported.
- A mutant counts as killed only when the required tests notice it without
  the reference's own guards (`touchstone.taskmaking.guards`): a type-only,
  length-only or "no exception" test that fails only because a guard fires
  does not test the behaviour, and a mutant of the guards alone is left out.
- Output mutants: each `return` of an entry function returns its value
  weakened at one site, shape kept: one element of a list, tuple, dict or set,
  one character of a string, one attribute of an object, or the number itself
  changed, at the first and at the last position (`PERTURB_SOURCE`, appended
  to the mutant's module). Tests that check only a length, a type,
  non-emptiness or one end of the result let one survive; every one must be
  killed. A value that cannot be changed with its shape kept (None, an empty
  container) is returned as it is; a `return` of such a literal is no site
  (raising there instead would let any test with an empty case kill every
  output mutant).
- Trivial baselines: each entry function's body replaced by `return None`, a
  constant, an empty container, its first argument or a copy of it (the
  unchanged input, even when the tests check `result is not arg`); every one must fail.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from pathlib import Path

from touchstone.taskmaking import guards
from touchstone.tasks.mutate import (
    Edit,
    MutationSite,
    apply_edit,
    change_sites,
    changed_statements,
    compile_error,
    module_name,
    render,
)
from touchstone.tasks.schema import Task
from touchstone.harness import is_test_file
from touchstone import pyast

BASELINES = ["None", "0", '""', "False", "True", "[]", "{}", "()", "<identity>", "<copy>"]
TRUSTED_BASELINES = ["None", "<identity>"]
_BASELINE_NAMES = {
    "<identity>": "its first argument",
    "<copy>": "a copy of its first argument",
}  # tests from a pinned seed project: a spot check is enough
FIXED_SEED = 0  # the sample of a big change depends on its code only


@dataclass(frozen=True)
class Mutant:
    path: str
    operator: str
    unit: str
    line: int
    source: str


def reference_sources(task: Task) -> list[tuple[str, str, str | None]]:
    """(rel path, reference text, workspace text or None) of every reference .py file."""
    ref = task.reference_dir
    out = []
    for path in sorted(ref.rglob("*.py")) if ref else []:
        rel = path.relative_to(ref).as_posix()
        current = task.workspace_dir / rel
        out.append((rel, path.read_text(), current.read_text() if current.is_file() else None))
    return out


def changed_top_level(task: Task) -> Iterator[tuple[str, str, str | None, ast.Module, list[int]]]:
    """(rel path, reference text, workspace text, reference AST, indices of the
    changed top-level statements) of every reference .py file that parses."""
    for rel, ref_text, ws_text in reference_sources(task):
        try:
            yield rel, ref_text, ws_text, pyast.parse_shared(ref_text), changed_statements(ref_text, ws_text)
        except SyntaxError:
            continue


@dataclass(frozen=True)
class _Pending:
    """A mutation site of one reference file, rendered only when picked."""

    rel: str
    source: str
    workspace: str | None
    tree: ast.Module
    site: MutationSite

    @property
    def operator(self) -> str:
        return self.site.operator

    def render(self) -> Mutant | None:
        """The compilable mutant, or None (no clean splice, or it equals the start)."""
        m = render(self.source, self.tree, self.site, self.rel)
        if m is None or m.source == self.workspace or compile_error(m.source, self.rel) is not None:
            return None
        return Mutant(self.rel, m.operator, m.unit, m.lineno, m.source)


def mutation_sites(task: Task) -> list[_Pending]:
    """Every mutation site in what the reference changed (`mutate.changed_units`:
    the functions or statements its changed lines sit in, not their enclosing
    class), unrendered: listing them costs one parse per file."""
    out = []
    for rel, ref_text, ws_text in reference_sources(task):
        try:
            tree = pyast.parse(ref_text)
        except SyntaxError:
            continue
        out += [
            _Pending(rel, ref_text, ws_text, tree, s) for s in change_sites(tree, ref_text, ws_text, module_name(rel))
        ]
    return out


def all_mutants(task: Task) -> list[Mutant]:
    """Every compilable mutant of the changed code, minus the starting workspace itself."""
    return [m for p in mutation_sites(task) if (m := p.render()) is not None]


def spread(items: list, key: Callable[[Any], str]) -> list:
    """`items` in round-robin order over `key` (an operator), each pool shuffled with a
    fixed seed: any prefix is a sample spread over operators that depends on the code only."""
    rng = random.Random(FIXED_SEED)
    pools: dict[str, list] = {}
    for item in items:
        pools.setdefault(key(item), []).append(item)
    for pool in pools.values():
        rng.shuffle(pool)
    out: list = []
    while len(out) < len(items):
        out += [pools[op].pop() for op in sorted(pools) if pools[op]]
    return out


def sample(mutants: list[Mutant], limit: int) -> list[Mutant]:
    """All of them, or `limit` spread round-robin over operators, fixed seed."""
    return mutants if len(mutants) <= limit else spread(mutants, lambda m: m.operator)[:limit]


def pick(sites: list[_Pending], limit: int, skip: Callable[[Mutant], bool]) -> tuple[list[Mutant], list[Mutant]]:
    """(picked, skipped): sites taken in `spread` order and rendered one at a time until
    `limit` mutants are picked; a mutant `skip` says is uninformative (a change of the
    guards alone) is set aside. Only what is looked at is rendered and analysed."""
    picked: list[Mutant] = []
    skipped: list[Mutant] = []
    for pending in spread(sites, lambda p: p.operator):
        if len(picked) >= limit:
            break
        if (m := pending.render()) is not None:
            (skipped if skip(m) else picked).append(m)
    return picked, skipped


# -- output mutants: the result weakened at one site, its shape kept ------------------------

PERTURB = "__touchstone_perturbed__"
# appended to an output mutant's module; `where` 0 changes the first element, -1 the last
PERTURB_SOURCE = f'''

def {PERTURB}(value, where, depth=0):
    """`value` changed at one site, its type and length kept (a weakened result)."""
    import copy

    kind = type(value)
    if depth > 20:
        return value
    if kind is bool:
        return not value
    if isinstance(value, int) and not isinstance(value, bool):
        return value + 1
    if isinstance(value, float):
        return value + 1.0 + abs(value) / 2 if value == value else 1.0
    if isinstance(value, complex):
        return value + 1
    if isinstance(value, str) and value:
        i = where % len(value)
        return value[:i] + ("x" if value[i] != "x" else "y") + value[i + 1 :]
    if isinstance(value, (bytes, bytearray)) and value:
        i = where % len(value)
        return value[:i] + bytes([value[i] ^ 1]) + value[i + 1 :]
    if isinstance(value, (list, tuple)) and value:
        items = list(value)
        items[where] = {PERTURB}(items[where], where, depth + 1)
        if kind is list or kind is tuple:
            return kind(items)
        return kind._make(items) if hasattr(kind, "_make") else kind(items)
    if isinstance(value, dict) and value:
        out = copy.copy(value)
        key = list(out)[where]
        out[key] = {PERTURB}(out[key], where, depth + 1)
        return out
    if isinstance(value, (set, frozenset)) and value:
        items = sorted(value, key=repr)
        old = items[where]
        return kind((value - {{old}}) | {{{PERTURB}(old, where, depth + 1)}})
    if hasattr(value, "__next__"):
        return iter({PERTURB}(list(value), where, depth + 1))
    state = getattr(value, "__dict__", None)
    public = [k for k in (state or {{}}) if not k.startswith("_")]
    if public and not isinstance(value, type) and not callable(value):
        out = copy.copy(value)
        name = public[where]
        object.__setattr__(out, name, {PERTURB}(getattr(value, name), where, depth + 1))
        return out
    return value  # None, an empty container: nothing to change with the shape kept
'''


def _returns(fn: ast.AST) -> list[ast.Return]:
    """The `return <value>` statements of `fn` itself (not of functions nested in it)."""
    out, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None and not _unchangeable(node.value):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return sorted(out, key=lambda r: (r.lineno, r.col_offset))


def _unchangeable(value: ast.expr) -> bool:
    """`None`, `""`, `[]`, `()`, `{}`, `set()`: a literal no single-site change keeps the shape of."""
    if isinstance(value, ast.Constant):
        return value.value is None or value.value in ("", b"")
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args and not value.keywords


def output_mutants(task: Task, limit: int = 8) -> list[Mutant]:
    """Per `return` of each entry function whose result is in the tested contract
    (not in `results_outside_contract`): its value weakened at the first and at the
    last site (`PERTURB_SOURCE`), in source order, at most `limit`."""
    refs = {rel: ref for rel, ref, _ws in reference_sources(task)}
    dropped = set(results_outside_contract(task))
    out: list[Mutant] = []
    for rel, fn in entry_functions(task):
        if fn in dropped:
            continue
        tree = pyast.parse(refs[rel])
        node = next(
            (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn), None
        )
        for ret in _returns(node) if node is not None else []:
            for where, end in ((ast.Constant(0), "first"), (ast.UnaryOp(ast.USub(), ast.Constant(1)), "last")):
                call = ast.Call(ast.Name(PERTURB, ast.Load()), [ret.value, where], [])
                text = apply_edit(refs[rel], tree, Edit(ret, "value", None, ret.value, call))
                if text is not None:
                    text = text.rstrip("\n") + "\n" + PERTURB_SOURCE
                    out.append(Mutant(rel, f"weaken_result_{end}", f"{module_name(rel)}:{fn}", ret.lineno, text))
    return out[:limit]


def results_outside_contract(task: Task) -> list[str]:
    """Entry functions whose return value the hidden tests never look at: every
    place the tests name the function is a call whose value is dropped (a bare
    statement, or `pytest.raises(E, fn, ...)`). A side-effect function ("returns
    None", "the return value is unspecified") is tested by what it changes, so
    weakening what it returns proves nothing about the tests. Decided by the
    tests, never by the statement's word alone (a gaming proposer could write
    "unspecified" over tests that check a length). A function the tests never
    name, or name in any other way (passed around, wrapped, by a string), stays
    in the contract."""
    sources = [p.read_text(errors="replace") for p in sorted(task.hidden_tests_dir.rglob("*.py"))]
    trees = []
    for text in sources:
        try:
            trees.append(pyast.parse_shared(text))
        except (SyntaxError, ValueError):
            return []  # tests we cannot read: keep every result in the contract
    return [fn for _rel, fn in entry_functions(task) if _only_dropped(trees, fn)]


def _only_dropped(trees: list[ast.Module], fn: str) -> bool:
    uses: list[bool] = []  # per mention of fn: is its value dropped?
    for tree in trees:
        names = {fn} | {a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                        for a in n.names if a.name == fn and a.asname}  # fmt: skip
        parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == fn:
                return False  # named by a string: getattr and the like, anything may happen to it
            mention = (isinstance(node, ast.Name) and node.id in names) or (
                isinstance(node, ast.Attribute) and node.attr == fn
            )
            if mention:
                uses.append(_dropped(node, parents))
    return bool(uses) and all(uses)


def _dropped(node: ast.expr, parents: dict[int, ast.AST]) -> bool:
    """Is `node` (a mention of a function) called with its value thrown away?"""
    call = parents.get(id(node))
    if isinstance(call, ast.Call) and node in call.args[1:2] and _is_raises(call.func):
        return True  # pytest.raises(E, fn, ...): only the exception is looked at
    if not (isinstance(call, ast.Call) and call.func is node):
        return False
    holder = parents.get(id(call))
    if isinstance(holder, ast.Await):
        holder = parents.get(id(holder))
    return isinstance(holder, ast.Expr)


def _is_raises(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "raises") or (
        isinstance(func, ast.Attribute) and func.attr == "raises"
    )


# -- trivial baselines ---------------------------------------------------------------------


def entry_functions(task: Task) -> list[tuple[str, str]]:
    """(rel path, function name): the declared entry points, or when there are
    none, the reference's changed top-level functions."""
    out: list[tuple[str, str]] = []
    sources = {rel for rel, _ref, _ws in reference_sources(task)}
    for ep in task.entry_points:
        for rel in (ep.module.replace(".", "/") + ".py", ep.module.replace(".", "/") + "/__init__.py"):
            if rel in sources and (rel, ep.function) not in out:
                out.append((rel, ep.function))
    if out:
        return out
    for rel, _ref, _ws, tree, changed in changed_top_level(task):
        for i in changed:
            node = tree.body[i]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (rel, node.name) not in out:
                out.append((rel, node.name))
    return out


def baseline_source(source: str, function: str, value: str, behind_guards: bool = False) -> str | None:
    """`source` with top-level `function`'s body (docstring kept; with `behind_guards`,
    its leading guards too) replaced by `return value` (`<identity>`: its first
    parameter, `<copy>`: a shallow copy of it); None when not possible."""
    tree = pyast.parse(source)
    node = next(
        (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function), None
    )
    if node is None:
        return None
    body = node.body
    start = len(node.body) - len(guards.body_of(node))
    if behind_guards:
        start += guards.leading_guards(tree, node)
    if value in ("<identity>", "<copy>"):
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        if not params:
            return None
        value = params[0] if value == "<identity>" else f"__import__('copy').copy({params[0]})"
    lines = source.splitlines(keepends=True)
    if start >= len(body):
        first = body[-1].end_lineno  # only a docstring (and guards): append the return after it
        indent = " " * body[-1].col_offset
        new = lines[:first] + [f"{indent}return {value}\n"] + lines[node.end_lineno :]
    else:
        first = body[start]
        if first.lineno == node.lineno:
            return None  # a one-line def: no lines of its own to replace
        indent = " " * first.col_offset
        new = lines[: first.lineno - 1] + [f"{indent}return {value}\n"] + lines[node.end_lineno :]
    text = "".join(new)
    return text if compile_error(text, "baseline.py") is None else None


def baselines(
    task: Task, skip: set[str] = frozenset(), limit_functions: int = 3, values: list[str] = BASELINES
) -> list[tuple[str, str, str]]:
    """(description, rel path, text) of each trivial baseline; `skip`: "rel:function"
    the tests never run (replacing those proves nothing). A function that starts
    with guards also gets each baseline behind them: tests of the guards alone
    must not make a trivial body look tested."""
    refs = {rel: ref for rel, ref, _ in reference_sources(task)}
    out = []
    for rel, fn in [e for e in entry_functions(task) if f"{e[0]}:{e[1]}" not in skip][:limit_functions]:
        for value in values:
            name = f"{fn} returns {_BASELINE_NAMES.get(value, value)}"
            text = baseline_source(refs[rel], fn, value)
            guarded = baseline_source(refs[rel], fn, value, behind_guards=True)
            out += [(name, rel, text)] if text is not None else []
            out += [(f"{name} behind its guards", rel, guarded)] if guarded not in (None, text) else []
    return out


def workspace_modules(workspace: Path) -> dict[str, str]:
    """rel path -> text of every non-test Python file of a workspace."""
    out = {}
    for p in sorted(workspace.rglob("*.py")):
        rel = p.relative_to(workspace).as_posix()
        if not is_test_file(rel):
            try:
                out[rel] = p.read_text()
            except (UnicodeDecodeError, OSError):
                continue
    return out
