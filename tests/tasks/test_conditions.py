"""The run conditions: grading's plan first, then unpredictable extra runs; more
of them for tasks that read the clock or unseeded randomness."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import CASES
from touchstone.harness import run_plan as plan
from touchstone.harness.grading import faketime_library
from touchstone.taskmaking.conditions import Condition, reference_conditions, run_condition, touches_nondeterminism


def test_grading_plan_first_then_extra_runs_that_differ_every_time() -> None:
    conds = reference_conditions(
        "bwrap", k=3, extra=2, clock_runs=1, cross_backend=False, nondeterministic=False, more=6
    )
    assert [(c.run, c.grading) for c in conds[:3]] == [(0, True), (1, True), (2, True)]
    assert [plan(c.run) for c in conds[:3]] == [(0, "forward"), (1, "reverse"), (2, "shuffle:2")]
    extra = conds[3:]
    assert len(extra) == 2 + (1 if faketime_library() else 0) and not any(c.grading for c in extra)
    assert all(c.run >= 3 for c in extra)
    again = reference_conditions(
        "bwrap", k=3, extra=2, clock_runs=1, cross_backend=False, nondeterministic=False, more=6
    )
    assert {c.run for c in extra}.isdisjoint({c.run for c in again[3:]})  # not predictable from one run to the next
    if faketime_library():
        [clock] = [c for c in extra if c.clock_offset_s]
        assert 86_400 <= clock.clock_offset_s <= 501 * 86_400 and "clock +" in clock.label()


def test_clock_and_randomness_readers_get_more_runs(tmp_path: Path) -> None:
    reads = {
        c.id: touches_nondeterminism(c.write(tmp_path))
        for c in CASES
        if c.id in ("cond-random-failure", "cond-clock-window", "honest-uses-clock", "honest-runs")
    }
    assert reads == {
        "cond-random-failure": ["hidden_tests/test_solution.py"],
        "cond-clock-window": ["hidden_tests/test_solution.py"],
        "honest-uses-clock": ["reference/solution.py"],
        "honest-runs": [],
    }
    more = reference_conditions("bwrap", k=3, extra=2, clock_runs=1, cross_backend=False, nondeterministic=True, more=6)
    assert len(more) == 3 + 2 + 6 + (2 if faketime_library() else 0)


def test_only_the_reference_s_change_counts_not_the_module_around_it(tmp_path: Path) -> None:
    """A fix in a module that reads the clock elsewhere (as most real libraries do) gets no
    extra runs; the same module with the clock read inside the changed function does."""
    module = "import time\n\n\ndef stamp():\n    return time.time()\n\n\ndef solve(x):\n    return x + {fix}\n"
    case = next(c for c in CASES if c.id == "honest-runs")
    for fix, expected in (("1", []), ("int(time.time() * 0)", ["reference/solution.py"])):
        task = case.write(tmp_path, f"clock-{len(expected)}")
        (task.workspace_dir / "solution.py").write_text(module.format(fix="2"))
        (task.reference_dir / "solution.py").write_text(module.format(fix=fix))
        assert touches_nondeterminism(task) == expected


def test_a_run_records_where_each_failure_was_raised(tmp_path: Path) -> None:
    """A guard's exception is raised in the code under test, a test's own check in the
    test file: the record keeps the innermost traceback location of each failure."""
    case = next(c for c in CASES if c.id == "weak-guard-own-class")
    task = case.write(tmp_path)
    mutant = case.reference.replace("if not xs:", "if xs:")  # the guard now fires on valid input
    run = run_condition(
        task, Condition(run=0, backend="bwrap", grading=True), role="mutant", files={"solution.py": mutant}
    )
    guard_line = next(i for i, line in enumerate(mutant.splitlines(), 1) if 'raise Rejected("empty list")' in line)
    assert run.raised_at["test_solution.py::test_shape"] == f"solution.py:{guard_line}"
    assert run.raised_at["test_solution.py::test_rejects[bad1]"].startswith("test_solution.py:")  # DID NOT RAISE
