"""The labeled adversarial corpus (tests/tasks/adversarial.py) through validation.
Cases decided by the static checks run always; the rest run every sandbox check
and are marked slow (about 10-20 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks.adversarial import BENCHMARK, CASES, Case
from touchstone.tasks.validate import ValidationConfig, validate_task

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
