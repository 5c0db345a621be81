"""The reference set's cache key (a set built under other settings is never reused),
which runs it yields, and the turn states spread over them."""

from __future__ import annotations

import json

import polars as pl

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
    monkeypatch.setattr(reference, "REFERENCE_FORMAT", reference.REFERENCE_FORMAT + 1)
    assert reference.reference_key([one]) != reference.reference_key([one, other])


def _run(task_id: str, turns: int, accepted: bool) -> dict:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": task_id}]
    for i in range(turns):
        messages += [{"role": "assistant", "content": f"{task_id}-{i}"}, {"role": "tool", "content": "out"}]
    return {
        "task_id": task_id,
        "trajectory_id": f"t-{task_id}",
        "accepted": accepted,
        "messages": messages,
        "tools": [],
    }


def test_the_reference_proper_is_the_accepted_runs_and_turn_states_spread_over_all(tmp_path):
    runs = [_run("a", 3, True), _run("b", 20, False)]
    path = tmp_path / "reference.parquet"
    pl.DataFrame([{**r, "messages": json.dumps(r["messages"]), "tools": "[]"} for r in runs]).write_parquet(path)
    assert [r["task_id"] for r in reference.read_reference(path)] == ["a"]
    every = reference.read_reference(path, accepted_only=False)
    assert [r["messages"] for r in every] == [r["messages"] for r in runs]
    assert len(reference.turn_states(every, limit=None)) == 23
    states = reference.turn_states(every, limit=6)
    # the next assistant turn of each state: the first and last of all 23, four evenly between
    nxt = [runs[0 if s.task_id == "a" else 1]["messages"][len(s.prefix)]["content"] for s in states]
    assert nxt == ["a-0", "b-1", "b-6", "b-10", "b-15", "b-19"]
    assert reference.turn_states(every, limit=30) == reference.turn_states(every, limit=None)
