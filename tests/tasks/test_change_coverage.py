"""Coverage of the reference's change, traced in the sandbox: an untested
branch is missed; an untested helper is reported, not required; an untested
guard (a `raise` for input the task does not promise to handle) is reported,
not required."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import CASES, Case, stub
from touchstone.taskmaking.change_coverage import changed_lines, measure


def _case(cid: str):
    return next(c for c in CASES if c.id == cid)


def test_changed_lines_are_the_replaced_and_inserted_runs() -> None:
    assert changed_lines("a\nb\nc\nd\n", "a\nB\nc\n") == {2, 4}
    assert changed_lines("x = 1\n", None) == {1}


BRANCH = Case(
    "untested-branch",
    "coverage",
    {"weak_tests"},
    "Double a number; negative ones give 0.",
    stub("def solve(x):", "Twice x, or 0 below 0."),
    'def solve(x):\n    """Twice x, or 0 below 0."""\n    if x < 0:\n        return 0\n    return x * 2\n',
    "from solution import solve\n\n\ndef test_double():\n    assert solve(3) == 6\n",
)


def test_untested_branch_is_missed_and_untested_guard_and_helper_are_reported(tmp_path: Path) -> None:
    branch = measure(BRANCH.write(tmp_path), "bwrap", timeout=30)
    assert branch.missed == {"solution.py": [4]} and 0.6 < branch.share < 1  # `return 0` never runs
    guard = measure(_case("weak-type-only").write(tmp_path), "bwrap", timeout=30)
    assert guard.missed == {} and guard.share == 1.0 and guard.guards == {"solution.py": [3, 4]}  # never raised
    helper = measure(_case("honest-untested-helper").write(tmp_path), "bwrap", timeout=30)
    assert helper.share == 1.0 and helper.unexercised == ["solution.py:_describe"]
    table = measure(_case("honest-table").write(tmp_path), "bwrap", timeout=30)
    assert table.required == {"solution.py": [1]} and table.share == 1.0  # a module-level table runs at import
