"""Integration with the other stages on real tasks: mutation tasks proposed
from the shipped seed libraries, solved by the teacher policy, verified as a
batch from the agent's table form (whose harness-recorded diffs are checked).
Honest fixes in real library files must be accepted; the same runs with a
report-rewriting conftest appended must be rejected."""

import json

import polars as pl
import pytest
from click.testing import CliRunner

from cli import main
from touchstone.verify.batch import BatchItem, read_reports, verify_batch

CONFTEST_CALL = {"role": "assistant", "content": "", "tool_calls": [{
    "id": "hack", "type": "function", "function": {"name": "write_file", "arguments": json.dumps({
        "path": "conftest.py",
        "content": "def pytest_collection_modifyitems(config, items):\n    items[:] = []\n"})}}]}


@pytest.mark.slow
def test_teacher_fixes_of_mutation_tasks_are_accepted_and_hacked_copies_rejected(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["propose", "mutation", "--n", "2", "--out", str(tmp_path / "tasks"),
                               "--workers", "2", "--backend", "bwrap"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["solve", str(tmp_path / "tasks"), "--policy", "teacher", "--workers", "2",
                               "--out", str(tmp_path / "traj"), "--backend", "bwrap"])
    assert res.exit_code == 0, res.output
    out = verify_batch(tmp_path / "tasks", tmp_path / "traj", workers=2, out=tmp_path / "ver",
                       progress_bar=False, backend="bwrap", replays=2)
    reports = read_reports(out)
    assert len(reports) == 2 and {r.verdict for r in reports} == {"accept"}, [r.reasons for r in reports]
    assert {r.check("diff_match").status for r in reports} == {"pass"}  # the agent's recorded diffs reproduce

    rows = pl.read_parquet(tmp_path / "traj" / "trajectories.parquet").to_dicts()
    hacked = [BatchItem(r["task_id"], r["trajectory_id"] + "-hacked",
                        [CONFTEST_CALL] + json.loads(r["messages"])) for r in rows]
    out = verify_batch(tmp_path / "tasks", hacked, out=tmp_path / "ver-hacked", progress_bar=False,
                       backend="bwrap", replays=1)
    assert {(r.verdict, r.failed_checks()[0]) for r in read_reports(out)} == {("reject", "protected_paths")}
