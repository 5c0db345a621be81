"""Curriculum levels of repair tasks, for a model that must climb them (docs/ROUNDS.md, "Curriculum").

- level 1, `shown`: a one-site mutation whose statement also shows the buggy function, its
  file and its current source (what the failing tests name), so a small model can fix it in
  one `str_replace` and submit; it still has to find the bug in the function.
- level 2, `site`: the same one-site mutations in real libraries, statement as proposed
  (failing tests only): the model has to find the function itself.
- level 3, `multi`: multi-site and SWE-style instances (imported task sets).

`show_function(task, out)` writes the level-1 variant of a mutation task: the same workspace,
hidden tests and reference, the statement extended by the function's current source;
`show_functions(root)` makes a proposer's validated task set level 1 in place (the round
assets' `level: shown`). The
source shown is the workspace's (the bug included), never the reference's, so the statement
leaks no fix.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from touchstone.pyast import parse
from touchstone.taskmaking.index import read_index, write_index
from touchstone.tasks.schema import TASK_FILE, Task, TaskError, load_task

LEVELS = ("shown", "site", "multi")
SHOWN_SUFFIX = "-shown"


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


def shown_statement(task: Task) -> str:
    """The level-1 statement of a one-site mutation task: its statement and the buggy
    function's current source. Raises TaskError for a task that does not name one function
    in one file (not a one-site mutation)."""
    path = task.source.meta.get("path")
    if task.source.proposer != "mutation" or not path or len(task.entry_points) != 1:
        raise TaskError(task.dir, "level 1 needs a one-site mutation task (one entry point, its file in source.meta)")
    qualname = task.entry_points[0].function
    code = function_source((task.workspace_dir / path).read_text(), qualname)
    if code is None:
        raise TaskError(task.dir, f"{path} does not define {qualname}")
    return (
        f"{task.statement}\n\nThe bug is in the function `{qualname}` in `{path}`. Its current source:\n"
        f"```python\n{code.rstrip()}\n```\n"
        "Fix it with one `str_replace` on that file, then call `submit`."
    )


def show_function(task: Task, out: Path) -> Task:
    """The level-1 variant of a mutation task, written to `out/<id>-shown` (the task itself is left as it is)."""
    statement = shown_statement(task)
    dest = out / f"{task.id}{SHOWN_SUFFIX}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task.dir, dest, ignore=shutil.ignore_patterns(TASK_FILE))
    task.model_copy(update={"id": dest.name, "statement": statement}).write(dest)
    return load_task(dest)


def show_functions(root: Path) -> int:
    """Make a validated task set (a proposer's output: task dirs + index.parquet) level 1 in
    place: each kept mutation task's statement shows its function, and the index records the new content
    hashes. Returns how many tasks changed. Validation stays valid: workspace, hidden tests and
    reference are unchanged, and the statement shows only what the workspace holds."""
    rows, changed = read_index(root), 0
    for i, row in enumerate(rows):
        if row.status != "kept" or row.proposer != "mutation":  # level 1 is of procedural tasks only
            continue
        task = load_task(root / row.id)
        task.model_copy(update={"statement": shown_statement(task)}).write(task.dir)
        rows[i] = row.model_copy(update={"content_hash": load_task(task.dir).content_hash})
        changed += 1
    write_index(root, rows)
    return changed
