"""LLM proposals: parsing, dedup and validation on recorded model outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from touchstone.agent.policies.spec import PolicySpec
from touchstone.taskmaking.index import query
from touchstone.taskmaking.proposers.llm import (
    ProposalError,
    learnability_reward,
    normalized_ast_hash,
    parse_proposal,
    propose_from_outputs,
    solved,
)
from touchstone.tasks.schema import load_task_set
from touchstone.taskmaking.validate import ValidationConfig

OUTPUTS = json.loads((Path(__file__).parent / "fixtures" / "llm_outputs.json").read_text())
BY_LABEL = {o["label"]: o["output"] for o in OUTPUTS}


def test_parse_well_formed_from_fenced_json() -> None:
    p = parse_proposal(BY_LABEL["well_formed"])
    assert p.entry_point == "rle" and "raise NotImplementedError" in p.stub


@pytest.mark.parametrize(
    ("label", "fragment"),
    [
        ("malformed_json", "no JSON object"),
        ("malformed_missing_key", "reference: Field required"),
        ("malformed_reference_syntax", "reference does not parse"),
    ],
)
def test_parse_malformed(label: str, fragment: str) -> None:
    with pytest.raises(ProposalError, match=fragment):
        parse_proposal(BY_LABEL[label])


def test_normalized_hash_ignores_names_and_docstrings() -> None:
    a, b = parse_proposal(BY_LABEL["well_formed"]), parse_proposal(BY_LABEL["duplicate"])
    assert normalized_ast_hash(a.reference) == normalized_ast_hash(b.reference)
    assert normalized_ast_hash(a.reference) != normalized_ast_hash(a.reference.replace("j - i", "j - i + 1"))


def test_learnability_reward() -> None:
    assert [learnability_reward(r) for r in (0.0, 0.25, 0.5, 1.0, None)] == [0.0, 0.75, 0.5, 0.0, 0.0]


def test_recorded_outputs_through_validation(tmp_path: Path) -> None:
    out = tmp_path / "llm"
    rows, kept = propose_from_outputs(
        [o["output"] for o in OUTPUTS], out, origin="recorded", cfg=ValidationConfig(backend="bwrap")
    )
    reasons = {r.id.split("-")[1]: r.reason or r.status for r in rows}
    assert [reasons[f"{i:04d}"] for i in range(len(OUTPUTS))] == [
        "kept",
        "malformed",
        "malformed",
        "malformed",
        "duplicate",
        "already_solved",
        "reference_fails",
    ]
    [task] = load_task_set(out)
    assert task.source.proposer == "llm"
    assert query(out, "SELECT count(*) FROM tasks WHERE status = 'rejected' AND reason IS NOT NULL")[0][0] == 6
    # a second batch deduplicates against the first set
    rows2, _ = propose_from_outputs(
        [BY_LABEL["well_formed"]],
        tmp_path / "again",
        origin="recorded",
        existing=[out],
        cfg=ValidationConfig(backend="bwrap"),
    )
    assert rows2[0].reason == "duplicate"
    # the solve check used for learnability grades a patch against the hidden tests
    ref = (task.reference_dir / "solution.py").read_text()
    stub = (task.workspace_dir / "solution.py").read_text()
    import difflib

    patch = "".join(difflib.unified_diff(stub.splitlines(True), ref.splitlines(True), "a/solution.py", "b/solution.py"))
    assert solved(task, patch, "bwrap") and not solved(task, "", "bwrap")


def test_propose_llm_records_a_reward_per_proposal(tmp_path: Path) -> None:
    """End to end with a real policy backend: the scripted teacher answers with tool
    calls, not a proposal, so every output is rejected as malformed with reward 0."""
    import polars as pl

    from touchstone.taskmaking.proposers.llm import propose_llm

    result = propose_llm(
        PolicySpec.parse("teacher"), tmp_path / "llm", n=2, attempts=1, cfg=ValidationConfig(backend="bwrap")
    )
    rewards = pl.read_parquet(result.rewards_path)
    assert result.kept == 0 and rewards.height == 2
    assert rewards["reason"].to_list() == ["malformed", "malformed"] and rewards["reward"].to_list() == [0.0, 0.0]
    assert rewards["policy"].to_list() == ["teacher", "teacher"]


def test_solve_rate_runs_the_policy_and_grades_its_patch(tmp_path: Path) -> None:
    """The real teacher policy repairs a single flipped comparison that the visible
    tests expose (rate 1, reward 0), and cannot implement a stub (rate 0, reward 0)."""
    from tests.tasks.conftest import CALC, write_calc
    from touchstone.agent.policies import make_policy
    from touchstone.taskmaking.proposers.llm import solve_rate
    from touchstone.tasks.schema import Task, load_task

    d = tmp_path / "flip"
    write_calc(d / "workspace")
    (d / "workspace" / "calc" / "__init__.py").write_text(CALC.replace("s += x", "s -= x"))
    write_calc(d / "hidden_tests")
    (d / "hidden_tests" / "calc" / "__init__.py").unlink()
    (d / "reference" / "calc").mkdir(parents=True)
    (d / "reference" / "calc" / "__init__.py").write_text(CALC)
    Task(id="flip", statement="total returns wrong sums").write(d)
    policy = make_policy(PolicySpec.parse("teacher"))
    assert solve_rate(load_task(d), policy, 1, "bwrap") == 1.0
    _, [stub_task] = propose_from_outputs(
        [BY_LABEL["well_formed"]], tmp_path / "one", origin="recorded", cfg=ValidationConfig(backend="bwrap")
    )
    assert solve_rate(stub_task, policy, 1, "bwrap") == 0.0
