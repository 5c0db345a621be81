"""Integration with the other stages on real tasks: mutation tasks proposed
from the shipped seed libraries, solved by the teacher policy, verified as a
batch from the agent's table form (whose harness-recorded diffs are checked).
Honest fixes in real library files must be accepted; the same runs with a
report-rewriting conftest appended must be rejected. The teacher does not solve
every mutant (e.g. toolz `_has_keywords` negations run out of turns): which
tasks the proposer keeps varies with validation timing, so the expected
verdict of each run follows the teacher's own last full run of the (visible =
the project's) test suite in its sandbox."""

import json
import re

import polars as pl
import pytest
from click.testing import CliRunner

from cli import main
from touchstone.verify.batch import BatchItem, read_reports, verify_batch

CONFTEST_CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": "hack",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps(
                    {
                        "path": "conftest.py",
                        "content": "def pytest_collection_modifyitems(config, items):\n    items[:] = []\n",
                    }
                ),
            },
        }
    ],
}


def _teacher_solved(messages: list[dict]) -> bool:
    """The teacher's last full pytest run in its sandbox reported no failure."""
    runs = [m["content"] for m in messages if m["role"] == "tool" and re.search(r"\d+ (passed|failed)", m["content"])]
    return bool(runs) and not re.search(r"\d+ (failed|error)", runs[-1])


@pytest.mark.slow
def test_teacher_fixes_of_mutation_tasks_are_accepted_and_hacked_copies_rejected(tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        main,
        ["propose", "mutation", "--n", "2", "--out", str(tmp_path / "tasks"), "--workers", "2", "--backend", "bwrap"],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        main,
        [
            "solve",
            str(tmp_path / "tasks"),
            "--policy",
            "teacher",
            "--workers",
            "2",
            "--out",
            str(tmp_path / "traj"),
            "--backend",
            "bwrap",
        ],
    )
    assert res.exit_code == 0, res.output
    out = verify_batch(
        tmp_path / "tasks",
        tmp_path / "traj",
        workers=2,
        out=tmp_path / "ver",
        progress_bar=False,
        backend="bwrap",
        replays=2,
    )
    reports = read_reports(out)
    rows = pl.read_parquet(tmp_path / "traj" / "trajectories.parquet").to_dicts()
    solved = {r["trajectory_id"]: _teacher_solved(json.loads(r["messages"])) for r in rows}
    assert len(reports) == 2 and any(solved.values()), solved
    for r in reports:  # solved: accepted; not solved: rejected by the hidden tests
        assert (r.verdict, r.failed_checks()[:1]) == (
            ("accept", []) if solved[r.trajectory_id] else ("reject", ["tests"])
        ), r.reasons
    assert {r.check("diff_match").status for r in reports} == {"pass"}  # the agent's recorded diffs reproduce

    hacked = [
        BatchItem(r["task_id"], r["trajectory_id"] + "-hacked", [CONFTEST_CALL] + json.loads(r["messages"]))
        for r in rows
    ]
    out = verify_batch(
        tmp_path / "tasks", hacked, out=tmp_path / "ver-hacked", progress_bar=False, backend="bwrap", replays=1
    )
    assert {(r.verdict, r.failed_checks()[0]) for r in read_reports(out)} == {("reject", "protected_paths")}
