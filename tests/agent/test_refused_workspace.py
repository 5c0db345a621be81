"""Red team: a tree the disk quota admits but the harness will not walk (many
hard links to one file, large sparse files: every name counts at its apparent
size, since every name is copied, graded and exported at that size) is the
agent's outcome: the episode ends `workspace_refused`, the verifier rejects
with the reason, a batch goes on. Never `sandbox_error`, never inconclusive."""

from __future__ import annotations

import pytest

from tests.agent.test_loop import ScriptedPolicy, tc
from tests.sandbox.test_walker import TREES_WITHIN_THE_QUOTA as TREES
from touchstone.agent.loop import run_episode
from touchstone.verify.batch import BatchItem, read_reports, verify_batch
from touchstone.verify.verifier import verify_trajectory


@pytest.mark.parametrize("tree", sorted(TREES))
def test_the_episode_ends_as_the_agent_s_outcome_and_the_verifier_rejects(simple_task, sandbox_backend, tree, tmp_path):
    policy = ScriptedPolicy([tc("bash", command=TREES[tree]), tc("submit")])
    traj = run_episode(simple_task, policy, backend=sandbox_backend)
    assert traj.exit_reason == "workspace_refused" and "over its limits" in traj.error, traj.error
    report = verify_trajectory(simple_task, traj.messages, replays=1, backend=sandbox_backend)
    assert report.verdict == "reject", report.reasons
    assert report.check("replay").status == "fail" and "refused: step 0" in report.check("replay").evidence
    # in a batch, next to an honest trajectory: a row each, the batch goes on
    items = [BatchItem(simple_task.id, "t-refused", traj.messages), BatchItem(simple_task.id, "t-empty", [])]
    out = verify_batch(simple_task.dir, items, out=tmp_path / "out", progress_bar=False, backend=sandbox_backend,
                       replays=1)  # fmt: skip
    verdicts = {r.trajectory_id: r.verdict for r in read_reports(out)}
    assert verdicts == {"t-refused": "reject", "t-empty": "reject"}
