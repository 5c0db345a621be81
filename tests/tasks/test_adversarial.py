"""The labeled adversarial corpus (tests/tasks/adversarial.py) through validation.
Cases decided by the static checks run always; the rest run every sandbox check
and are marked slow (about 10-20 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks.adversarial import BENCHMARK, CASES, Case
from touchstone.taskmaking.validate import ValidationConfig, validate_task

CFG = ValidationConfig(backend="bwrap", cross_backend=False, contamination_sets=[BENCHMARK])


def _verdict(case: Case, tmp_path: Path):
    v = validate_task(case.write(tmp_path), CFG)
    got = "kept" if v.kept else v.reason
    assert got in case.expect, f"{case.id}: {got}: {v.detail}"
    return v


@pytest.mark.parametrize("case", [c for c in CASES if c.static], ids=lambda c: c.id)
def test_static_families(case: Case, tmp_path: Path) -> None:
    v = _verdict(case, tmp_path)
    assert not v.runs, "a static rejection runs nothing in the sandbox"
    assert {c.name for c in v.checks if c.status == "skip"} >= {"start", "reference", "mutation"}


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if not c.static], ids=lambda c: c.id)
def test_sandbox_families(case: Case, tmp_path: Path) -> None:
    _verdict(case, tmp_path)


@pytest.mark.slow
def test_untested_helper_verdict_does_not_depend_on_the_task_id(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "honest-untested-helper")
    a = validate_task(case.write(tmp_path, "id-a"), CFG)
    b = validate_task(case.write(tmp_path, "reworded-id-b"), CFG)
    assert a.kept and b.kept and a.mutation_score == b.mutation_score
    assert a.check("mutation").evidence["mutants"] == b.check("mutation").evidence["mutants"]
    assert any("_describe is never run" in w for w in a.warnings)


@pytest.mark.slow
def test_solver_from_the_statement_runs_when_a_policy_is_configured(tmp_path: Path) -> None:
    """The scripted teacher stands in for a served model (none runs here): it
    repairs bugs and cannot write a function from a stub, so no attempt solves
    the task and it is flagged for review, not kept."""
    case = next(c for c in CASES if c.id == "honest-runs")
    cfg = CFG.model_copy(update={"solver": "teacher", "solver_attempts": 1})
    v = validate_task(case.write(tmp_path), cfg)
    solver = v.check("solver")
    assert solver.evidence["attempts"] == 1 and solver.evidence["policy"] == "teacher"
    assert (v.kept, v.reason, v.needs_review) == (False, "needs_review", True)
    assert [r.role for r in v.runs].count("solver") == 1
