"""The mutation proposer on real projects in the real sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks.conftest import write_calc
from touchstone.tasks.environment import task_environment
from touchstone.taskmaking.index import query
from touchstone.taskmaking.leak import find_leaks
from touchstone.tasks.mutate import Mutation
from touchstone.taskmaking.proposers.mutation import SeedReport, build_candidate, propose_mutation, statement_for
from touchstone.harness import run_hidden_tests
from touchstone.tasks.schema import load_task_set
from touchstone.tasks.seeding import SeedError, resolve_seed
from touchstone.taskmaking.validate import Validation, ValidationConfig


def check_kept_task(task) -> None:
    """F2P fails on the workspace and passes once the original is restored; no history."""
    env = task_environment(task)  # glom's tests import face, boltons: only the task's environment has them
    before = run_hidden_tests(task, required=task.fail_to_pass, environment=env, backend="bwrap")
    after = run_hidden_tests(
        task, overlays=[task.reference_dir], required=task.required_tests, environment=env, backend="bwrap"
    )
    assert set(before.failed) == set(task.fail_to_pass) and not before.passed
    assert after.ok and set(after.passed) == set(task.required_tests)
    names = {p.name for p in task.workspace_dir.rglob("*")}
    assert not names & {".git", "__pycache__"} and not any(n.endswith((".orig", ".pyc")) for n in names)
    assert find_leaks(task) == []


def test_local_seed_yields_validated_tasks(calc_seed: Path, tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    result = propose_mutation(out, seeds=[str(calc_seed)], n=3, workers=2)
    assert result.seeds[0].usable and result.kept >= 2
    tasks = load_task_set(out)
    assert len(tasks) == result.kept
    for task in tasks:
        check_kept_task(task)
        assert task.source.proposer == "mutation" and task.source.operator
        assert "Do not modify the tests" in task.statement
    # every candidate has an index row; every rejected one a reason
    rows = query(out, "SELECT status, reason FROM tasks")
    assert len(rows) == result.kept + result.rejected
    assert all(reason for status, reason in rows if status == "rejected")


def test_operators_choose_the_kind_of_bug(calc_seed: Path, tmp_path: Path) -> None:
    result = propose_mutation(tmp_path / "tasks", seeds=[str(calc_seed)], n=2, workers=2, operators=["comparison_flip"])
    tasks = load_task_set(tmp_path / "tasks")
    assert result.kept == len(tasks) >= 1
    assert {t.source.operator for t in tasks} == {"comparison_flip"}
    assert {op for (op,) in query(tmp_path / "tasks", "SELECT operator FROM tasks")} == {"comparison_flip"}
    with pytest.raises(ValueError, match="unknown mutation operator"):
        propose_mutation(tmp_path / "none", seeds=[str(calc_seed)], n=1, operators=["flip"])
    assert not (tmp_path / "none").exists()  # refused before any sandbox run


def test_a_statement_is_the_same_in_every_process() -> None:
    """pytest quotes object reprs; their addresses differ per process, the statement must not."""

    def failing(address: str) -> dict[str, str]:
        return {
            "tests/test_memo.py::test_memoize": f"AssertionError: assert 1 == 3\n"
            f" +  where 1 = <function memoize.<locals>.memof at {address}>(1, 2)"
        }

    one = statement_for("toolz==1.0", failing("0x7f634f1119e0"), {"tests/test_x.py": "<object at 0x7f75ce1a19e0>"})
    two = statement_for("toolz==1.0", failing("0x7fd4f11711c0"), {"tests/test_x.py": "<object at 0x7f0000000010>"})
    assert one == two
    assert "memoize.<locals>.memof at 0x..." in one and "assert 1 == 3" in one


def test_seed_whose_suite_fails_is_reported_and_skipped(calc_seed: Path, tmp_path: Path) -> None:
    broken = write_calc(tmp_path / "broken", broken=True)
    result = propose_mutation(tmp_path / "out", seeds=[str(broken), str(calc_seed)], n=1, workers=1)
    by_name = {s.name: s for s in result.seeds}
    assert not by_name["broken"].usable and "test_broken" in by_name["broken"].detail
    assert by_name["calc-project"].usable and result.kept == 1
    with pytest.raises(SeedError, match="no usable seed"):
        propose_mutation(tmp_path / "out2", seeds=[str(broken)], n=1, workers=1)


def test_mutant_that_does_not_compile_is_discarded(calc_seed: Path, tmp_path: Path) -> None:
    seed = resolve_seed(calc_seed, tmp_path / "work")
    broken = Mutation("remove_statement", "calc/__init__.py", "calc:clamp", 3, "def clamp(x, lo, hi):\n    break\n")
    report = SeedReport(seed.name, True, "", [])
    verdict = build_candidate(seed, report, broken, tmp_path / "t", ValidationConfig(backend="bwrap"))
    assert isinstance(verdict, Validation) and verdict.reason == "not_compilable" and "break" in verdict.detail


@pytest.mark.slow
def test_default_seeds(tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    result = propose_mutation(out, n=2, workers=2)
    assert all(s.usable for s in result.seeds) and len(result.seeds) == 4 and result.kept >= 2, result.seeds
    for task in load_task_set(out):
        check_kept_task(task)
        assert task.source.origin in ("inflection==0.5.1", "toolz==1.0.0", "cachetools==5.3.3", "glom==23.5.0")


def test_candidate_ids_are_unique_and_spread_over_functions(tmp_path: Path) -> None:
    import random
    from collections import Counter

    from touchstone.taskmaking.proposers.mutation import MAX_PER_UNIT, candidates
    from touchstone.tasks.seeding import default_seeds

    inflection = default_seeds(tmp_path)[0]
    cands = list(
        candidates(
            [(inflection, SeedReport(inflection.name, True, "", []))],
            ValidationConfig(backend="bwrap"),
            random.Random(0),
        )
    )
    ids = [c.id for c in cands]
    assert len(ids) == len(set(ids)) > 10
    per_unit = Counter(c.source.unit for c in cands)
    assert max(per_unit.values()) <= MAX_PER_UNIT and len(per_unit) > 5
