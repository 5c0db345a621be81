"""The proposers' shared engine: failures are recorded, never fatal."""

from __future__ import annotations

from pathlib import Path

from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.common import Candidate, reject, run_candidates
from touchstone.tasks.schema import TaskSource
from touchstone.taskmaking.validate import ValidationConfig


def _boom(_task_dir: Path):
    raise RuntimeError("seed code exploded")


def test_a_failing_candidate_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    cands = [
        Candidate("a", TaskSource(unit="u1"), _boom),
        Candidate("a", TaskSource(unit="u1"), _boom),  # the same id twice runs once
        Candidate("b", TaskSource(unit="u2"), lambda _d: reject("b", "malformed", "no JSON")),
    ]
    rows, kept = run_candidates(cands, tmp_path, n=None, workers=2, cfg=ValidationConfig(backend="bwrap"), desc="t")
    assert kept == [] and sorted((r.id, r.reason) for r in rows) == [("a", "error"), ("b", "malformed")]
    assert "RuntimeError: seed code exploded" in next(r.detail for r in rows if r.id == "a")
    # the index is on disk even though nothing was finalized
    assert {r.id for r in read_index(tmp_path)} == {"a", "b"}
    assert not (tmp_path / "a").exists()


CALC_REF = """import ast

_OK = (ast.Expression, ast.BinOp, ast.Constant, ast.Add, ast.Sub, ast.Mult)


def calc(expr):
    tree = ast.parse(expr, mode="eval")
    if not all(isinstance(n, _OK) for n in ast.walk(tree)):
        raise ValueError(expr)
    return eval(compile(tree, "<calc>", "eval"), {"__builtins__": {}})
"""
CALC_TESTS = """import pytest
from solution import calc


@pytest.mark.parametrize("expr, want", [("2*3+1", 7), ("10-4", 6), ("7", 7), ("2*(3+4)", 14)])
def test_calc(expr, want):
    assert calc(expr) == want


@pytest.mark.parametrize("expr", ["__import__('os')", "x + 1", "abs(-2)", "2 ** 3", "[1]"])
def test_refuses(expr):
    with pytest.raises(ValueError):
        calc(expr)
"""


def _calc_task(task_dir: Path, reference: str, proposer: str = "problems"):
    from touchstone.taskmaking.proposers.common import write_solution_task
    from touchstone.tasks.schema import Task

    task = Task(id=task_dir.name, statement="Evaluate arithmetic.", source=TaskSource(proposer=proposer, unit="calc"))
    return write_solution_task(
        task_dir, task, stub="def calc(expr):\n    raise NotImplementedError\n", reference=reference, tests=CALC_TESTS
    )


def test_rules_the_reference_trips_are_allowed_for_the_task(tmp_path: Path) -> None:
    from touchstone.taskmaking.proposers.common import with_audit_allow

    task = with_audit_allow(_calc_task(tmp_path / "calc", CALC_REF))
    assert task.source.meta["audit_allow"] == ["S-DYNAMIC-CODE"]
    plain = with_audit_allow(_calc_task(tmp_path / "plain", "def calc(expr):\n    return 7\n"))
    assert "audit_allow" not in plain.source.meta
    # rules guarding the judge itself are never allowed, whatever the reference does
    sneaky = with_audit_allow(_calc_task(tmp_path / "sneaky", CALC_REF + "\nimport pytest\n__name__ = 'x'\n"))
    assert sneaky.source.meta["audit_allow"] == ["S-DYNAMIC-CODE"]
    # mutation tasks: the original is the verifier's baseline instead
    assert "audit_allow" not in with_audit_allow(_calc_task(tmp_path / "mut", CALC_REF, "mutation")).source.meta


def test_proposed_tasks_carry_their_audit_allow(tmp_path: Path) -> None:
    cands = [Candidate("calc", TaskSource(proposer="problems", unit="calc"), lambda d: (_calc_task(d, CALC_REF), None))]
    rows, kept = run_candidates(cands, tmp_path, n=None, workers=1, cfg=ValidationConfig(backend="bwrap"), desc="t")
    assert [t.source.meta.get("audit_allow") for t in kept] == [["S-DYNAMIC-CODE"]], rows


def test_the_retired_eval_fraction_is_accepted_with_a_warning(tmp_path: Path) -> None:
    """`--eval-fraction` once split kept tasks into train/eval; scripts that pass it keep running."""
    from click.testing import CliRunner

    from cli import main

    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("{not json\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["propose", "problems", "--jsonl", str(jsonl), "--out", str(out),
                                       "--eval-fraction", "0.3"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--eval-fraction is ignored" in result.stderr
    assert [(r.status, r.reason) for r in read_index(out)] == [("rejected", "malformed")]
