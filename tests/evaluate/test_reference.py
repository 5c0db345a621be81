"""The reference set's cache key: a set built under other settings is never reused."""

from __future__ import annotations

from tests.agent.conftest import MINILIB, minilib_task
from touchstone.evaluate import reference


def test_the_key_changes_with_the_tasks_and_the_teachers_turns(tmp_path, monkeypatch):
    one = minilib_task(tmp_path / "a", "flip", "`clamp` is wrong.", MINILIB.replace("if x > hi:", "if x <= hi:"))
    other = minilib_task(tmp_path / "b", "div", "`mean` is wrong.", MINILIB.replace("/ len(xs)", "* len(xs)"))
    key = reference.reference_key([one, other])
    assert reference.reference_key([other, one]) == key  # the order of the tasks does not matter
    assert reference.reference_key([one]) != key
    monkeypatch.setattr(reference, "TEACHER_MAX_TURNS", reference.TEACHER_MAX_TURNS + 8)
    assert reference.reference_key([one, other]) != key  # runs with more turns solve more: another set
