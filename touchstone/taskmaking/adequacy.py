"""Test adequacy: do the hidden tests pin the reference's behaviour down?

- Mutants: every mutation site (adequacy operators, `touchstone.tasks.mutate`)
  in every top-level statement the reference changes (functions, classes with
  nested classes, module-level tables and constants); when there are more than
  `max_mutants`, a sample spread over operators with a fixed seed, so the
  choice depends on the code only, never on the task id. All are run; the full
  score is reported.
- A mutant counts as killed only when the required tests notice it without
  the reference's own guards (`touchstone.taskmaking.guards`): a type-only,
  length-only or "no exception" test that fails only because a guard fires
  does not test the behaviour, and a mutant of the guards alone is left out.
- Trivial baselines: each entry function's body replaced by `return None`, a
  constant, an empty container, its first argument or a copy of it (the
  unchanged input, even when the tests check `result is not arg`); every one must fail.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from touchstone.taskmaking import guards
from touchstone.tasks.mutate import changed_statements, compile_error, module_name, statement_mutations
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
            yield rel, ref_text, ws_text, pyast.parse(ref_text), changed_statements(ref_text, ws_text)
        except SyntaxError:
            continue


def all_mutants(task: Task) -> list[Mutant]:
    """Every compilable mutant of the changed statements, minus the starting workspace itself."""
    out = []
    for rel, ref_text, ws_text, _tree, changed in changed_top_level(task):
        for m in statement_mutations(ref_text, rel, module_name(rel), changed):
            if m.source != ws_text and compile_error(m.source, rel) is None:
                out.append(Mutant(rel, m.operator, m.unit, m.lineno, m.source))
    return out


def sample(mutants: list[Mutant], limit: int) -> list[Mutant]:
    """All of them, or `limit` spread round-robin over operators, fixed seed."""
    if len(mutants) <= limit:
        return mutants
    rng = random.Random(FIXED_SEED)
    pools: dict[str, list[Mutant]] = {}
    for m in mutants:
        pools.setdefault(m.operator, []).append(m)
    for pool in pools.values():
        rng.shuffle(pool)
    picked: list[Mutant] = []
    while len(picked) < limit:
        for op in sorted(pools):
            if pools[op] and len(picked) < limit:
                picked.append(pools[op].pop())
    return picked


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
