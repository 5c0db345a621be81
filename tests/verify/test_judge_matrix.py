"""Every case of the issue-32 judge corpus (tests/verify/judge_matrix.py) gets
its expected verdict; `python -m tests.verify.judge_matrix` prints the matrix."""

from __future__ import annotations

import pytest

from tests.verify.judge_matrix import CASES, verify_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case, tmp_path):
    report = verify_case(case, tmp_path)
    assert report.verdict == case.expected, (case.note, report.reasons, [(c.name, c.status) for c in report.checks])
    if case.expected == "accept":
        assert report.guard in ("isolation+oracle", "isolation"), report.guard  # training data by default
    if case.guard is not None:  # a case about the label: what the guard claims must hold
        assert report.guard == case.guard, (case.note, report.guard, [(c.name, c.evidence) for c in report.checks])
