"""The task loader: good tasks load, malformed ones fail naming file and problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from touchstone.tasks.schema import Task, TaskError, load_task, load_task_set


def make_task(root: Path, meta: dict | str | None = None, *, hidden: bool = True) -> Path:
    d = root / "t1"
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / "solution.py").write_text("def f():\n    return 0\n")
    if hidden:
        (d / "hidden_tests").mkdir()
        (d / "hidden_tests" / "test_f.py").write_text("from solution import f\n\ndef test_f():\n    assert f() == 1\n")
    if meta is None:
        meta = {"id": "t1", "statement": "make f return 1"}
    (d / "task.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    return d


def test_good_task_loads_with_defaults(tmp_path: Path) -> None:
    t = load_task(make_task(tmp_path))
    assert (t.id, t.timeout_s, t.required_tests, t.reference_dir) == ("t1", 60.0, None, None)
    assert t.workspace_dir == (tmp_path / "t1" / "workspace").resolve()
    assert len(t.content_hash) == 64


def test_content_hash_changes_with_any_file(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    before = load_task(d).content_hash
    (d / "hidden_tests" / "test_f.py").write_text("def test_f():\n    assert True\n")
    assert load_task(d).content_hash != before


@pytest.mark.parametrize("split", ["train", "eval"])
def test_a_task_written_with_the_retired_split_still_loads_with_the_same_hash(tmp_path: Path, split: str) -> None:
    """Task sets written before `split` was retired keep loading, and keep their
    content hash (the held-out exclusion and every trajectory match on it)."""
    plain = load_task(make_task(tmp_path / "a"))
    old = load_task(make_task(tmp_path / "b", {"id": "t1", "statement": "make f return 1", "split": split}))
    assert old.model_dump() == plain.model_dump() and old.content_hash == plain.content_hash
    old.write(tmp_path / "b" / "t1")
    assert "split" not in json.loads((tmp_path / "b" / "t1" / "task.json").read_text())


@pytest.mark.parametrize(
    ("meta", "fragment"),
    [
        ("{not json", "bad JSON at line 1"),
        ("[1, 2]", "must hold a JSON object"),
        ({"id": "t1", "statment": "x"}, "unknown key 'statment' (did you mean 'statement'?)"),
        ({"id": "t1", "statement": "x", "fail_to_pass": ["/abs/test_f.py::t"]}, "must be a relative path"),
        ({"id": "t1", "statement": "x", "protected": ["../escape.py"]}, "must not contain '..'"),
        ({"id": "t1", "statement": "   "}, "statement is empty"),
        ({"id": "bad id!", "statement": "x"}, "id 'bad id!'"),
        ({"id": "t1", "statement": "x", "timeout_s": "soon"}, "timeout_s"),
        ({"id": "t1", "statement": "x", "entry_points": [{"module": "a-b", "function": "f"}]}, "not a dotted"),
    ],
)
def test_malformed_task_json_names_file_and_problem(tmp_path: Path, meta, fragment: str) -> None:
    d = make_task(tmp_path, meta)
    with pytest.raises(TaskError) as err:
        load_task(d)
    assert str(d / "task.json") in str(err.value)
    assert fragment in str(err.value)


def test_missing_pieces(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a task directory"):
        load_task(tmp_path / "nope")
    d = make_task(tmp_path, hidden=False)
    with pytest.raises(TaskError, match="missing directory hidden_tests/"):
        load_task(d)
    (d / "hidden_tests").mkdir()
    with pytest.raises(TaskError, match="holds no test file"):
        load_task(d)
    (d / "task.json").unlink()
    with pytest.raises(TaskError, match="missing task.json"):
        load_task(d)


def test_symlink_out_of_task_is_rejected(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "workspace" / "leak").symlink_to("/etc/passwd")
    with pytest.raises(TaskError, match="symlink points outside"):
        load_task(d)


def test_task_set_skips_nested_and_rejects_duplicates(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "workspace" / "task.json").write_text("{}")  # a file of the task, not a task
    assert [t.id for t in load_task_set(tmp_path)] == ["t1"]
    other = tmp_path / "t2"
    other.mkdir()
    for sub in ("workspace", "hidden_tests"):
        (other / sub).mkdir()
    (other / "hidden_tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    Task(id="t1", statement="dup").write(other)
    with pytest.raises(TaskError, match="duplicate task id 't1'"):
        load_task_set(tmp_path)
