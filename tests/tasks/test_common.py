"""The proposers' shared engine: failures are recorded, never fatal; splits by unit."""

from __future__ import annotations

from pathlib import Path

from touchstone.tasks.index import read_index
from touchstone.tasks.proposers.common import Candidate, reject, run_candidates, split_of
from touchstone.tasks.schema import TaskSource
from touchstone.tasks.validate import ValidationConfig


def _boom(_task_dir: Path):
    raise RuntimeError("seed code exploded")


def test_a_failing_candidate_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    cands = [Candidate("a", TaskSource(unit="u1"), _boom),
             Candidate("a", TaskSource(unit="u1"), _boom),  # the same id twice runs once
             Candidate("b", TaskSource(unit="u2"), lambda _d: reject("b", "malformed", "no JSON"))]
    rows, kept = run_candidates(cands, tmp_path, n=None, workers=2, cfg=ValidationConfig(backend="bwrap"), desc="t")
    assert kept == [] and sorted((r.id, r.reason) for r in rows) == [("a", "error"), ("b", "malformed")]
    assert "RuntimeError: seed code exploded" in next(r.detail for r in rows if r.id == "a")
    # the index is on disk even though nothing was finalized
    assert {r.id for r in read_index(tmp_path)} == {"a", "b"}
    assert not (tmp_path / "a").exists()


def test_split_is_a_function_of_the_unit() -> None:
    units = [f"lib:mod:f{i}" for i in range(200)]
    splits = [split_of(u, 0.2) for u in units]
    assert splits == [split_of(u, 0.2) for u in units]
    assert 20 <= splits.count("eval") <= 60
