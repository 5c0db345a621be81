"""Coverage of the reference's change by the hidden tests: which changed lines
execute when the hidden tests run against the reference (a stdlib line tracer,
`touchstone/harness/sandbox_files/line_tracer.py`, in the sandbox).

Required lines: the statements (by their first line) of the reference's changed
line runs, docstrings aside, at module level or inside a function the tests
execute at all. A changed function the tests never enter is reported (an
untested helper), not required: whether it matters is the mutation score's
call. Nor are the reference's guards (`touchstone.taskmaking.guards`: a `raise`
for input the task does not promise to handle, a check of its own result):
they are not the behaviour the tests must pin down, and the mutation check
leaves them out too."""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from touchstone.harness import HiddenSuite, compose_tree
from touchstone.harness.grading import TestRunSpec, harness_mounts
from touchstone.sandbox import Limits, open_sandbox
from touchstone.taskmaking.adequacy import reference_sources
from touchstone.tasks.environment import task_environment
from touchstone.taskmaking.guards import guard_lines
from touchstone.tasks.mutate import changed_lines
from touchstone.tasks.schema import Task
from touchstone import pyast


@dataclass
class Coverage:
    required: dict[str, list[int]] = field(default_factory=dict)  # rel -> changed statement lines that must run
    missed: dict[str, list[int]] = field(default_factory=dict)  # rel -> required lines that did not run
    unexercised: list[str] = field(default_factory=list)  # "rel:function" changed but never entered
    guards: dict[str, list[int]] = field(default_factory=dict)  # rel -> changed guard lines, not required

    @property
    def share(self) -> float | None:
        total = sum(map(len, self.required.values()))
        return None if not total else 1 - sum(map(len, self.missed.values())) / total


def _statement_lines(tree: ast.Module) -> dict[int, ast.AST | None]:
    """First line of every statement -> innermost enclosing function (None: module level)."""
    out: dict[int, ast.AST | None] = {}

    def walk(node: ast.AST, func: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and not (
                isinstance(child, ast.Expr)
                and isinstance(getattr(child, "value", None), ast.Constant)
                and isinstance(child.value.value, str)
            ):
                out.setdefault(child.lineno, func)
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else func
            walk(child, inner)

    walk(tree, None)
    return out


def measure(task: Task, backend: str, timeout: float) -> Coverage:
    """Run the hidden tests on the reference under the tracer and compare."""
    sources = [(rel, ref, ws) for rel, ref, ws in reference_sources(task)]
    executed = trace(task, [rel for rel, _r, _w in sources], backend, timeout)
    cov = Coverage()
    for rel, ref, ws in sources:
        try:
            stmts = _statement_lines(pyast.parse_shared(ref))
        except SyntaxError:
            continue
        ran = set(executed.get(rel, []))
        entered = {id(f) for line, f in stmts.items() if f is not None and line in ran}
        want, skipped = [], set()
        guard = guard_lines(ref, ws)
        if exempt := sorted(changed_lines(ref, ws) & set(stmts) & guard):
            cov.guards[rel] = exempt
        for line in sorted((changed_lines(ref, ws) & set(stmts)) - guard):
            func = stmts[line]
            if func is None or id(func) in entered:
                want.append(line)
            else:
                skipped.add(f"{rel}:{getattr(func, 'name', '<lambda>')}")
        if want:
            cov.required[rel] = want
            if missed := [line for line in want if line not in ran]:
                cov.missed[rel] = missed
        cov.unexercised += sorted(skipped)
    return cov


def trace(task: Task, files: list[str], backend: str, timeout: float) -> dict[str, list[int]]:
    """rel path -> executed lines, for one run of the hidden tests on the reference."""
    with (
        tempfile.TemporaryDirectory(prefix="touchstone-cov-") as tmp,
        harness_mounts(("line_tracer.py", "tl_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce),
    ):
        overlays = [task.reference_dir] if task.reference_dir else []
        tree = compose_tree(Path(tmp) / "tree", task.workspace_dir, overlays=overlays, tests=task.hidden_tests_dir)
        env = {"TOUCHSTONE_TRACE_FILES": ",".join(files), "TOUCHSTONE_TRACE_OUT": f"{o_dir}/lines.json"}
        spec = TestRunSpec(HiddenSuite(task, None).test_modules, f"tl_{nonce}", h_dir, o_dir, env=env)
        with open_sandbox(
            tree,
            backend=backend,
            mounts=mounts,
            limits=Limits(timeout_s=timeout + 30),
            environment=task_environment(task),
        ) as sb:
            sb.exec(spec.command(), timeout=timeout)
        path = out / "lines.json"
        return json.loads(path.read_text()) if path.is_file() else {}
