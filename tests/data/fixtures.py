"""Hand-built trajectories and report files in the documented shapes."""

from __future__ import annotations

import json
from pathlib import Path


from touchstone.agent.tools import TOOL_SCHEMAS
from touchstone.agent.trajectory import Sampling, Trajectory, TurnRecord, write_tables
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
