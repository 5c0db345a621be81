"""Curriculum levels of repair tasks, for a model that must climb them (docs/ROUNDS.md, "Curriculum").

- level -1, `fix`: a one-site mutation whose statement shows the buggy lines and the lines that
  replace them: the answer is given, and what the model must do is the tool use (copy both
  exactly into one `str_replace`, then submit). The lowest rung, for a base that cannot yet
  correct a line (SmolLM2-135M solved no level-0 task); it teaches and measures only the acting.
- level 0, `line`: a one-site mutation whose statement also shows the buggy lines themselves
  (the smallest span of whole lines around the mutation that occurs once in its file, as the
  workspace holds them), so the model copies them into one `str_replace` and has only to
  correct them; the location is given, the fix is not.
- level 1, `shown`: a one-site mutation whose statement also shows the buggy function, its
  file and its current source (what the failing tests name), so a small model can fix it in
  one `str_replace` and submit; it still has to find the bug in the function.
- level 2, `site`: the same one-site mutations in real libraries, statement as proposed
  (failing tests only): the model has to find the function itself.
- level 3, `multi`: multi-site and SWE-style instances (imported task sets).

`show_function(task, out, level)` writes the level -1, 0 or 1 variant of a mutation task: the
same workspace, hidden tests and reference, the statement extended by the buggy lines (and, at
level -1, their fix) or the function's current source; `show_functions(root, level)` makes a
proposer's validated task set that level in place (the round assets' `level: fix` / `line` /
`shown`). Above level -1 what is shown is the workspace's (the bug included), never the
reference's, so the statement leaks no fix; level -1 gives it on purpose, after validation.
`reference_fix(task)` is that fix as one `str_replace` (privileged: read from the reference),
for the demonstrations of a warm start (`training.demonstrations`).
"""

from __future__ import annotations

import ast
import difflib
import shutil
from pathlib import Path
from typing import Literal

from touchstone.pyast import parse
from touchstone.taskmaking.index import read_index, write_index
from touchstone.tasks.schema import TASK_FILE, Task, TaskError, load_task

LEVELS = ("fix", "line", "shown", "site", "multi")
Shown = Literal["fix", "line", "shown"]  # the levels whose statements show where the bug is
ProposedLevel = Literal["site", "shown", "line", "fix"]  # what a proposer's validated set can be made
SUFFIXES = {"fix": "-fix", "line": "-line", "shown": "-shown"}


def function_source(source: str, qualname: str) -> str | None:
    """The source of function `qualname` (`f` or `Class.method`) in `source`, indented as in
    the file, decorators excluded; None when the file does not define it."""
    *owners, name = qualname.split(".")
    body = parse(source).body
    for owner in owners:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if cls is None:
            return None
        body = cls.body
    node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
    if node is None:
        return None
    lines = source.splitlines(keepends=True)
    return "".join(lines[node.lineno - 1 : node.end_lineno])


def reference_fix(task: Task) -> tuple[str, str, str]:
    """(path, old, new): the one-site fix of a mutation task as one `str_replace`, read from its
    reference (privileged: the task's answer). `old` is the smallest span of whole lines around
    the mutated lines that occurs once in the workspace file."""
    path = task.source.meta["path"]
    buggy = (task.workspace_dir / path).read_text().splitlines(keepends=True)
    fixed = (task.reference_dir / path).read_text().splitlines(keepends=True)
    changed = [op for op in difflib.SequenceMatcher(a=buggy, b=fixed, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not changed:
        raise ValueError(f"{task.id}: workspace and reference of {path} are the same")
    a0, a1, b0, b1 = changed[0][1], changed[-1][2], changed[0][3], changed[-1][4]
    text = "".join(buggy)
    for pad in range(len(buggy)):
        lo = max(a0 - pad, 0)
        old = "".join(buggy[lo : a1 + pad])
        if old.strip() and text.count(old) == 1:
            new = "".join(fixed[max(b0 - pad, 0) : b1 + pad])
            return path, old, new
    raise ValueError(f"{task.id}: no unique span around the fix in {path}")


def shown_statement(task: Task, level: Shown = "shown") -> str:
    """The level -1 (`fix`), 0 (`line`) or 1 (`shown`) statement of a one-site mutation task: its
    statement and the buggy lines (and their replacement) or the buggy function's current source.
    Raises TaskError for a task that does not name one function in one file (not a one-site
    mutation)."""
    path = task.source.meta.get("path")
    if task.source.proposer != "mutation" or not path or len(task.entry_points) != 1 or task.reference_dir is None:
        raise TaskError(task.dir, "levels -1, 0 and 1 need a one-site mutation task (one entry point, its file "
                                  "in source.meta, a reference)")  # fmt: skip
    qualname = task.entry_points[0].function
    if level in ("line", "fix"):
        try:
            _, code, fixed = reference_fix(task)
        except ValueError as exc:
            raise TaskError(task.dir, f"level {LEVELS.index(level) - 1}: {exc}") from None
        where = "this line" if code.count("\n") <= 1 else "these lines"
        shown = (
            f"{task.statement}\n\nThe bug is in the function `{qualname}` in `{path}`, in {where}:\n"
            f"```python\n{code.rstrip()}\n```\n"
        )
        if level == "fix":
            return (
                f"{shown}Replace {where} with:\n```python\n{fixed.rstrip()}\n```\n"
                f"Do it with one `str_replace` on that file whose `old` is {where} and whose `new` is the "
                "replacement, then call `submit`."
            )
        return f"{shown}Fix it with one `str_replace` on that file whose `old` is {where}, then call `submit`."
    code = function_source((task.workspace_dir / path).read_text(), qualname)
    if code is None:
        raise TaskError(task.dir, f"{path} does not define {qualname}")
    return (
        f"{task.statement}\n\nThe bug is in the function `{qualname}` in `{path}`. Its current source:\n"
        f"```python\n{code.rstrip()}\n```\n"
        "Fix it with one `str_replace` on that file, then call `submit`."
    )


def show_function(task: Task, out: Path, level: Shown = "shown") -> Task:
    """The level -1, 0 or 1 variant of a mutation task, written to `out/<id>-fix`, `out/<id>-line`
    or `out/<id>-shown` (the task itself is left as it is)."""
    statement = shown_statement(task, level)
    dest = out / f"{task.id}{SUFFIXES[level]}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task.dir, dest, ignore=shutil.ignore_patterns(TASK_FILE))
    task.model_copy(update={"id": dest.name, "statement": statement}).write(dest)
    return load_task(dest)


def show_functions(root: Path, level: Shown = "shown") -> int:
    """Make a validated task set (a proposer's output: task dirs + index.parquet) level -1, 0 or 1
    in place: each kept mutation task's statement shows its buggy lines (and their fix) or its
    function, and the index records the new content hashes. Returns how many tasks changed.
    Validation stays valid: workspace, hidden tests and reference are unchanged, and above level
    -1 the statement shows only what the workspace holds. A task whose buggy lines occur nowhere
    once (levels -1 and 0 cannot point at them) is shown its function instead."""
    rows, changed = read_index(root), 0
    for i, row in enumerate(rows):
        if row.status != "kept" or row.proposer != "mutation":  # levels 0 and 1 are of procedural tasks only
            continue
        task = load_task(root / row.id)
        try:
            statement = shown_statement(task, level)
        except TaskError:
            if level == "shown":
                raise
            statement = shown_statement(task, "shown")
        task.model_copy(update={"statement": statement}).write(task.dir)
        rows[i] = row.model_copy(update={"content_hash": load_task(task.dir).content_hash})
        changed += 1
    write_index(root, rows)
    return changed
