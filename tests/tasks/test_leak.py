"""The leak check: history/caches/backups and copies of the answer are found."""

from __future__ import annotations

from pathlib import Path

from touchstone.tasks.leak import answer_windows, find_leaks
from touchstone.tasks.schema import Task, load_task

REF = "def area(w, h):\n    check(w)\n    return w * h\n\n\ndef other():\n    return 1\n"
WS = "def area(w, h):\n    check(w)\n    return w + h\n\n\ndef other():\n    return 1\n"


def make(tmp_path: Path, statement: str = "area is wrong for rectangles") -> Path:
    d = tmp_path / "t"
    for sub in ("workspace", "hidden_tests", "reference"):
        (d / sub).mkdir(parents=True)
    (d / "workspace" / "geo.py").write_text(WS)
    (d / "reference" / "geo.py").write_text(REF)
    (d / "hidden_tests" / "test_geo.py").write_text("from geo import area\n\ndef test_area():\n    assert area(2, 3) == 6\n")
    Task(id="t", statement=statement).write(d)
    return d


def test_clean_task_has_no_leak(tmp_path: Path) -> None:
    assert find_leaks(load_task(make(tmp_path))) == []
    assert answer_windows(REF, WS) == ["check(w)\nreturn w * h"]


def test_backup_copy_vcs_and_caches_are_leaks(tmp_path: Path) -> None:
    d = make(tmp_path)
    (d / "workspace" / "geo.py.orig").write_text(REF)
    (d / "workspace" / ".git").mkdir()
    (d / "workspace" / "pkg" / "__pycache__").mkdir(parents=True)
    (d / "workspace" / "old").mkdir()
    (d / "workspace" / "old" / "geo_v1.py").write_text("# previous version\n" + REF)
    problems = find_leaks(load_task(d))
    assert any("geo.py.orig" in p for p in problems)
    assert any(p.startswith("workspace/.git:") for p in problems)
    assert any("__pycache__" in p for p in problems)
    assert "workspace/old/geo_v1.py: contains the reference's change to geo.py" in problems


def test_statement_that_gives_the_answer_is_a_leak(tmp_path: Path) -> None:
    d = make(tmp_path, statement="Fix area; it should read:\n    check(w)\n    return w * h\n")
    assert find_leaks(load_task(d)) == ["task.json statement: contains the reference's change to geo.py"]
