"""Revocation: a kept task whose reference fails in grading leaves the set, and
its proposer's reward is taken back; the reference is regraded in the sandbox."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.tasks.adversarial import CASES
from touchstone.tasks.index import IndexRow, read_index, write_index
from touchstone.tasks.revoke import RevokeError, revoke, revoke_if_reference_fails
from touchstone.tasks.schema import load_task_set

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
