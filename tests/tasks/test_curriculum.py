"""Curriculum levels -1, 0 and 1: a one-site mutation task whose statement shows the buggy lines
(at level -1 with their fix) or the buggy function's current source (the workspace's)."""

from __future__ import annotations

import json

import pytest

from tests.agent.conftest import MINILIB, minilib_task
from touchstone.taskmaking.curriculum import function_source, reference_fix, show_function, show_functions
from touchstone.tasks.schema import TaskError, load_task

CLASS_SOURCE = """\
class Box:
    @property
    def size(self):
        return 1

    def grow(self, n):
        return self.size + n
"""


def test_function_source_finds_functions_and_methods_as_indented_in_the_file():
    assert function_source(CLASS_SOURCE, "Box.grow") == "    def grow(self, n):\n        return self.size + n\n"
    assert function_source(CLASS_SOURCE, "Box.size").startswith("    def size(self):")  # decorator left out
    assert function_source(CLASS_SOURCE, "grow") is None and function_source(CLASS_SOURCE, "Crate.grow") is None


def _mutation_task(tmp_path):
    task = minilib_task(
        tmp_path, "clamp-flip", "`clamp` fails its tests.", MINILIB.replace("if x > hi:", "if x <= hi:")
    )
    meta = json.loads((task.dir / "task.json").read_text())
    meta["entry_points"] = [{"module": "minilib.core", "function": "clamp"}]
    meta["source"] = {"proposer": "mutation", "unit": "minilib.core:clamp", "meta": {"path": "minilib/core.py"}}
    (task.dir / "task.json").write_text(json.dumps(meta))
    (task.dir / "reference" / "minilib").mkdir(parents=True)
    (task.dir / "reference" / "minilib" / "core.py").write_text(MINILIB)
    return load_task(task.dir)


def test_the_reference_fix_is_one_unique_str_replace(tmp_path):
    task = _mutation_task(tmp_path)
    path, old, new = reference_fix(task)
    text = (task.workspace_dir / path).read_text()
    assert path == "minilib/core.py" and text.count(old) == 1
    assert text.replace(old, new) == MINILIB


def test_level_zero_shows_the_buggy_line_and_not_its_fix(tmp_path):
    task = _mutation_task(tmp_path / "site")
    line = show_function(task, tmp_path / "line", "line")
    assert line.id == "clamp-flip-line" and line.statement.startswith(task.statement)
    assert "`clamp` in `minilib/core.py`, in this line:\n```python\n    if x <= hi:\n```" in line.statement
    assert "if x > hi:" not in line.statement and "def clamp" not in line.statement  # no fix, no function
    assert line.source == task.source and line.content_hash != task.content_hash


def test_level_minus_one_shows_the_buggy_line_and_its_fix_and_the_fix_passes(tmp_path):
    task = _mutation_task(tmp_path / "site")
    fix = show_function(task, tmp_path / "fix", "fix")
    assert fix.id == "clamp-flip-fix" and fix.statement.startswith(task.statement)
    shown = "in this line:\n```python\n    if x <= hi:\n```\nReplace this line with:\n```python\n    if x > hi:\n```"
    assert shown in fix.statement and "def clamp" not in fix.statement
    text = (fix.workspace_dir / "minilib" / "core.py").read_text()  # what the statement says to do is the fix
    assert text.replace("    if x <= hi:\n", "    if x > hi:\n") == MINILIB


def test_level_one_shows_the_buggy_function_and_keeps_everything_else(tmp_path):
    task = _mutation_task(tmp_path / "site")
    shown = show_function(task, tmp_path / "shown")
    assert shown.id == "clamp-flip-shown" and shown.statement.startswith(task.statement)
    assert "`clamp` in `minilib/core.py`" in shown.statement
    assert "if x <= hi:" in shown.statement  # the bug as it is in the workspace, not the fix
    assert "if x > hi:" not in shown.statement
    assert shown.entry_points == task.entry_points and shown.source == task.source
    assert (shown.workspace_dir / "minilib/core.py").read_text() == (task.workspace_dir / "minilib/core.py").read_text()
    assert shown.content_hash != task.content_hash


def test_a_task_that_does_not_name_one_function_is_refused(tmp_path):
    task = minilib_task(tmp_path, "plain", "fix it", MINILIB)
    with pytest.raises(TaskError, match="one-site mutation"):
        show_function(task, tmp_path / "shown")


def test_a_validated_set_becomes_level_one_in_place_with_its_index_up_to_date(tmp_path):
    from touchstone.taskmaking.index import IndexRow, read_index, write_index

    task = _mutation_task(tmp_path)
    other = minilib_task(tmp_path, "imported", "fix it", MINILIB)
    write_index(
        tmp_path,
        [
            IndexRow(
                id=task.id, proposer="mutation", origin="", unit="", status="kept", content_hash=task.content_hash
            ),
            IndexRow(id=other.id, proposer="problems", origin="", unit="", status="kept"),
            IndexRow(id="gone", proposer="mutation", origin="", unit="", status="rejected", reason="already_solved"),
        ],
    )
    assert show_functions(tmp_path) == 1
    shown = load_task(task.dir)
    assert shown.id == task.id and "if x <= hi:" in shown.statement
    assert load_task(other.dir).statement == "fix it"  # not a mutation task: left as it is
    assert read_index(tmp_path)[0].content_hash == shown.content_hash != task.content_hash
