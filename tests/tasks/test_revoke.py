"""Revocation: a kept task whose reference fails in grading leaves the set, and
its proposer's reward is taken back; the reference is regraded in the sandbox."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from orchestration.resources import SandboxResource, VerifierResource
from tests.tasks.adversarial import CASES, Case
from touchstone.data.proposer import proposer_rewards
from touchstone.data.schema import ProposerConfig
from touchstone.harness import run_plan
from touchstone.taskmaking.index import IndexRow, read_index, write_index
from touchstone.taskmaking.revoke import RevokeError, revoke, revoke_if_reference_fails
from touchstone.taskmaking.proposers.selfplay import ProposalRecord
from touchstone.tasks.schema import load_task_set
from touchstone.verify.batch import read_reports
from training.round_engine import verify

CASE = next(c for c in CASES if c.id == "honest-runs")


def _kept_set(root: Path) -> Path:
    task = CASE.write(root, "t1")
    write_index(
        root,
        [
            IndexRow(
                id="t1",
                proposer="llm",
                origin="x",
                unit="t1",
                status="kept",
                content_hash=task.content_hash,
            )
        ],
    )
    pl.DataFrame({"task_id": ["t1", "t2"], "reward": [0.75, 0.5]}).write_parquet(root / "proposer_rewards.parquet")
    return root


def test_revoke_moves_the_task_and_takes_back_the_reward(tmp_path: Path) -> None:
    root = _kept_set(tmp_path / "set")
    rec = revoke(root, "t1", "reference fails under run 1")
    assert rec.reward_before == 0.75 and rec.moved_to and (root / ".revoked" / "t1" / "task.json").is_file()
    [row] = read_index(root)
    assert (row.status, row.reason) == ("revoked", "reference_fails_in_grading")
    assert load_task_set(root) == []
    rewards = pl.read_parquet(root / "proposer_rewards.parquet").sort("task_id")
    assert rewards["reward"].to_list() == [0.0, 0.5] and rewards["revoked"].to_list() == [True, False]
    assert rewards["reward_before_revocation"].to_list() == [0.75, 0.5]
    assert (root / "revocations.jsonl").read_text().count("\n") == 1
    with pytest.raises(RevokeError, match="no kept task 't1'"):
        revoke(root, "t1", "again")


def test_reference_passing_in_grading_is_not_revoked(tmp_path: Path) -> None:
    root = _kept_set(tmp_path / "set")
    [task] = load_task_set(root)
    assert revoke_if_reference_fails(root, task, backend="bwrap") is None
    assert read_index(root)[0].status == "kept"


# -- in a round: the verification stage regrades every kept task's reference -------------------

SEED_OF_RUN_1 = run_plan(1)[0]
# kept earlier, failing now: a test whose window has closed (fails on every run), and one that
# fails only under grading's second run (validation happened to pass it): two shapes of luck
LUCKY = {
    "closed-window": Case(
        "closed-window", "revocation", {"kept"}, "Add two numbers.", "def solve(a, b):\n    raise NotImplementedError\n",
        "def solve(a, b):\n    return a + b\n",
        "import time\n\nfrom solution import solve\n\n\ndef test_add():\n    assert solve(2, 3) == 5\n\n\n"
        "def test_window():\n    assert time.time() < 1_600_000_000  # passed when the task was validated\n",
    ),
    "one-run-in-two": Case(
        "one-run-in-two", "revocation", {"kept"}, "Double a number.", "def solve(x):\n    raise NotImplementedError\n",
        "def solve(x):\n    return 2 * x\n",
        "import os\n\nfrom solution import solve\n\n\ndef test_double():\n    assert solve(4) == 8\n"
        f'    assert os.environ["PYTHONHASHSEED"] != "{SEED_OF_RUN_1}"\n',
    ),
}  # fmt: skip


def _round_set(root: Path) -> Path:
    tasks = [CASE.write(root, "honest")] + [c.write(root) for c in LUCKY.values()]
    rows = [IndexRow(id=t.id, proposer="llm", origin="x", unit=t.id, status="kept", content_hash=t.content_hash)
            for t in tasks]  # fmt: skip
    write_index(root, rows)
    rewards = {"task_id": [t.id for t in tasks], "solve_rate": [0.5, 0.25, 0.5], "reward": [0.5, 0.75, 0.5]}
    pl.DataFrame(rewards).write_parquet(root / "proposer_rewards.parquet")  # as propose_llm writes it
    return root


def test_a_round_revokes_tasks_whose_reference_fails_in_grading(tmp_path: Path) -> None:
    """The verification stage's own calls: the references are regraded under the
    verifier's runs, the failing tasks are revoked in the index with their proposer's
    reward zeroed, and their trajectories are reported against a revoked task."""
    root = _round_set(tmp_path / "proposed_tasks")
    sandbox, verifier = SandboxResource(backend="bwrap", workers=2), VerifierResource(replays=2)
    revoked = verifier.revoke_failing_references(root, sandbox)
    assert {r.task_id for r in revoked} == set(LUCKY)
    by_id = {r.task_id: r for r in revoked}
    assert "on 2 of 2 runs" in by_id["closed-window"].evidence and "test_window" in by_id["closed-window"].evidence
    assert "on 1 of 2 runs" in by_id["one-run-in-two"].evidence and "run 1" in by_id["one-run-in-two"].evidence
    rows = {r.id: r for r in read_index(root)}
    assert rows["honest"].status == "kept" and [t.id for t in load_task_set(root)] == ["honest"]
    assert all((rows[t].status, rows[t].reason) == ("revoked", "reference_fails_in_grading") for t in LUCKY)
    rewards = pl.read_parquet(root / "proposer_rewards.parquet").sort("task_id")
    assert dict(zip(rewards["task_id"], rewards["reward"])) == {
        "closed-window": 0.0,
        "honest": 0.5,
        "one-run-in-two": 0.0,
    }
    assert by_id["closed-window"].reward_before == 0.75
    # self-play's proposer reward is read from the final index: a revoked task earns the invalid penalty
    proposals = [
        ProposalRecord(proposal_id=t, round="r001", kind="standalone", group=0, policy="p", checkpoint_hash=None,
                       prompt="[]", output="{}", turn="{}", references=[], status="kept", reason=None, detail="")
        for t in ("honest", *LUCKY)
    ]  # fmt: skip
    earned = {r.proposal_id: r for r in proposer_rewards(proposals, read_index(root), [], ProposerConfig())}
    assert all((earned[t].outcome, earned[t].reward) == ("invalid", -0.5) for t in LUCKY)
    assert earned["honest"].outcome == "unattempted"

    trajectories = tmp_path / "trajectories" / "closed-window"
    trajectories.mkdir(parents=True)
    (trajectories / "t-1.jsonl").write_text('{"role": "user", "content": "Add two numbers."}\n')
    out = verify(
        root, tmp_path / "trajectories", tmp_path / "reports", sandbox.sandboxes(), verifier.grading(), revoked=revoked
    )
    [report] = read_reports(out)
    assert report.verdict != "accept" and "was revoked: reference_fails_in_grading" in report.checks[0].evidence
