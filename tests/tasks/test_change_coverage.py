"""Coverage of the reference's change, traced in the sandbox: an untested
branch is missed; an untested helper is reported, not required."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import CASES
from touchstone.tasks.change_coverage import changed_lines, measure


def _case(cid: str):
    return next(c for c in CASES if c.id == cid)


def test_changed_lines_are_the_replaced_and_inserted_runs() -> None:
    assert changed_lines("a\nb\nc\nd\n", "a\nB\nc\n") == {2, 4}
    assert changed_lines("x = 1\n", None) == {1}


def test_untested_guard_is_missed_and_untested_helper_is_reported(tmp_path: Path) -> None:
    guard = measure(_case("weak-type-only").write(tmp_path), "bwrap", timeout=30)
    assert guard.missed == {"solution.py": [4]} and 0.8 < guard.share < 1  # `raise TypeError(...)` never runs
    helper = measure(_case("honest-untested-helper").write(tmp_path), "bwrap", timeout=30)
    assert helper.share == 1.0 and helper.unexercised == ["solution.py:_describe"]
    table = measure(_case("honest-table").write(tmp_path), "bwrap", timeout=30)
    assert table.required == {"solution.py": [1]} and table.share == 1.0  # a module-level table runs at import
