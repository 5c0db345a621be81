"""Hand-built trajectories and report files in the documented shapes."""

from __future__ import annotations

import json
from pathlib import Path


from tests.data.reports import report
from touchstone.episode.tools import TOOL_SCHEMAS
from touchstone.taskmaking.index import IndexRow, write_index
from touchstone.taskmaking.proposers.common import write_solution_task
from touchstone.taskmaking.proposers.selfplay import ProposalRecord, write_proposals
from touchstone.tasks.schema import EntryPoint, Task, TaskSource
from touchstone.episode.trajectory import Sampling, Trajectory, TurnRecord, write_tables
from touchstone.verify.batch import REPORTS_FILE, write_reports
from touchstone.verify.report import VerificationReport


def trajectory(
    tid: str,
    task_id: str = "task-a",
    calls: list[tuple[str, dict]] | None = None,
    exit_reason: str = "submitted",
    token_ids: bool = True,
    policy: str = "hf:/ckpt",
    task_hash: str = "h-a",
    raw_args: str | None = None,
) -> Trajectory:
    """A run: system + user, then one assistant tool call per turn with its observation."""
    calls = calls or [
        ("read_file", {"path": "calc.py"}),
        ("str_replace", {"path": "calc.py", "old": "-", "new": "+"}),
        ("submit", {}),
    ]
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Fix the bug in {task_id}."},
    ]
    turns = []
    for i, (name, args) in enumerate(calls):
        arguments = raw_args if (raw_args is not None and i == 0) else json.dumps(args)
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"{name} output {i}"})
        prompt = list(range(10 + 20 * i))
        turns.append(
            TurnRecord(
                turn=i,
                prompt_ids=prompt if token_ids else None,
                completion_ids=[7] * 12 if token_ids else None,
                logprobs=[-0.5] * 12 if token_ids else None,
            )
        )
    return Trajectory(
        trajectory_id=tid,
        task_id=task_id,
        task_hash=task_hash,
        attempt=0,
        policy=policy,
        checkpoint_hash="ck-1" if policy.startswith("hf:") else None,
        sampling=Sampling(),
        backend="bwrap",
        messages=messages,
        tools=TOOL_SCHEMAS,
        turns=turns,
        exit_reason=exit_reason,
        started_at="2026-01-01T00:00:00Z",
        wall_s=1.0,
        policy_s=0.5,
        sandbox_s=0.5,
        touchstone_version="0.1.0",
    )


def write_round(tmp: Path, trajectories: list[Trajectory], reports: list[VerificationReport]) -> tuple[Path, Path]:
    traj_file, _ = write_tables(trajectories, tmp / "rollouts")
    return write_reports(reports, tmp / "verify") / REPORTS_FILE, traj_file


# -- a round with self-play proposals -------------------------------------------------

POLICY = "hf:/ckpt"
# proposal -> (group, index status, reason, entry point or None)
PROPOSALS = {
    "p-learn": (0, "kept", None, "f_learn"),
    "p-bad": (0, "rejected", "malformed", None),
    "p-trivial": (1, "kept", None, "f_trivial"),
    "p-copy": (1, "rejected", "contaminated", None),
    "p-untried": (1, "kept", None, "f_untried"),
    "p-teacher": (2, "kept", None, "f_teacher"),
    "p-revoked": (2, "revoked", "reference_fails_in_grading", None),
}
# verified attempts: (trajectory id, task, policy, verdict)
ATTEMPTS = [
    ("a-ok", "task-a", POLICY, "accept"),
    ("a-bad", "task-a", POLICY, "reject"),
    ("l-1", "p-learn", POLICY, "accept"),
    ("l-2", "p-learn", POLICY, "reject"),
    ("l-3", "p-learn", POLICY, "reject"),
    ("l-4", "p-learn", POLICY, "inconclusive"),  # not an outcome: not counted
    ("l-5", "p-learn", "hf:/copy", "accept"),  # the same weights (checkpoint hash) under another spec: counted
    ("l-t", "p-learn", "teacher", "accept"),  # another policy: the proposer's own attempts exist, so not counted
    ("t-1", "p-trivial", POLICY, "accept"),
    ("t-2", "p-trivial", POLICY, "accept"),
    ("h-1", "p-teacher", "teacher", "accept"),
    ("h-2", "p-teacher", "teacher", "reject"),
    ("r-1", "p-revoked", POLICY, "accept"),  # solved, but its task was revoked: invalid all the same
]


def _task_dir(root: Path, pid: str, entry: str) -> None:
    source = TaskSource(proposer="llm", origin=POLICY, unit=pid, meta={"proposal": {"policy": POLICY}})
    task = Task(id=pid, statement=f"implement {entry}", source=source,
                entry_points=[EntryPoint(module="solution", function=entry)])  # fmt: skip
    # two proposals share one solution shape under different names
    body = "return x + 1" if entry in ("f_learn", "f_trivial") else f"return '{entry}' * x"
    write_solution_task(root / pid, task, stub=f"def {entry}(x):\n    raise NotImplementedError\n",
                        reference=f"def {entry}(x):\n    {body}\n", tests="def test_x():\n    pass\n")  # fmt: skip


def write_selfplay_round(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A round's task set with proposals, and its rollouts and reports:
    (task set, reports file, trajectories file)."""
    tasks = tmp_path / "proposed"
    records, rows = [], []
    for pid, (group, status, reason, entry) in PROPOSALS.items():
        prompt = [{"role": "system", "content": "design tasks"}, {"role": "user", "content": f"group {group}"}]
        records.append(
            ProposalRecord(
                proposal_id=pid,
                round="r001",
                kind="standalone",
                group=group,
                policy=POLICY,
                checkpoint_hash="ck-1",
                prompt=json.dumps(prompt),
                output=f"proposal {pid}",
                turn=json.dumps({"prompt_ids": [1, 2, 3], "completion_ids": [4, 5]}) if pid == "p-learn" else "{}",
                references=["task-a"],
                status=status,
                reason=reason,
                detail="",
            )  # fmt: skip
        )
        if entry:
            _task_dir(tasks, pid, entry)
        rows.append(IndexRow(id=pid, proposer="llm", origin=POLICY, unit=pid, status=status, reason=reason,
                             content_hash=f"hash-{pid}" if status == "kept" else None, policy=POLICY,
                             policy_checkpoint="ck-1"))  # fmt: skip
    rows.append(IndexRow(id="task-a", proposer="mutation", origin="seed", unit="seed:f", status="kept"))
    write_proposals(tasks, records)
    write_index(tasks, rows)
    trajs = [trajectory(t, task_id=task, policy=pol, task_hash="h-a") for t, task, pol, _ in ATTEMPTS]
    reps = [report(t, verdict, task_id=task, task_hash="h-a") for t, task, _, verdict in ATTEMPTS]
    reports_file, traj_file = write_round(tmp_path, trajs, reps)
    return tasks, reports_file, traj_file
