"""Join trajectories with their verification reports, and the helpers every
builder shares: lineage, chat conversion to TRL's format, token counts."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from touchstone.episode.trajectory import TRAJECTORIES_FILE, Trajectory, read_tables
from touchstone.data.schema import Lineage
from touchstone.verify.batch import REPORTS_FILE
from touchstone.verify.batch import read_reports
from touchstone.verify.report import VerificationReport


class DataError(ValueError):
    """Inputs that cannot be turned into training data (missing files, bad rows, mismatches)."""


class Example(BaseModel):
    """One trajectory and the verifier's report on it."""

    trajectory: Trajectory
    report: VerificationReport
    round: str | None = None

    @property
    def n_turns(self) -> int:
        return sum(1 for m in self.trajectory.messages if m.get("role") == "assistant")

    def lineage(self) -> dict[str, Any]:
        t, r = self.trajectory, self.report
        return Lineage(
            trajectory_id=t.trajectory_id,
            task_id=t.task_id,
            task_hash=t.task_hash,
            round=self.round,
            policy=t.policy,
            checkpoint_hash=t.checkpoint_hash,
            verifier_version=r.verifier_version,
            report_id=r.report_id,
            environment_digest=r.environment_digest or t.environment_digest,
        ).model_dump()


# ---------------------------------------------------------------- reading


def _dir_of(path: Path, filename: str) -> Path:
    """Accept either the Parquet file or the directory holding it."""
    return path.parent if path.name == filename else path


def read_trajectories(path: str | Path) -> list[Trajectory]:
    directory = _dir_of(Path(path), TRAJECTORIES_FILE)
    if not (directory / TRAJECTORIES_FILE).is_file():
        raise DataError(f"{path}: no {TRAJECTORIES_FILE} found")
    return read_tables(directory)


def reports_of(path: str | Path) -> list[VerificationReport]:
    """The verifier's reports under `path` (a reports.parquet or its directory),
    read with the verifier's own reader (which refuses a hand-edited verdict)."""
    directory = _dir_of(Path(path), REPORTS_FILE)
    if not (directory / REPORTS_FILE).is_file():
        raise DataError(f"{path}: no {REPORTS_FILE} found")
    try:
        return read_reports(directory)
    except ValueError as exc:
        raise DataError(str(exc)) from exc


def join(trajectories: list[Trajectory], reports: list[VerificationReport], round_key: str | None) -> list[Example]:
    """Pair each report with its trajectory. A report without a trajectory, or
    whose task hash disagrees, is an error: that data cannot be trusted."""
    by_id = {t.trajectory_id: t for t in trajectories}
    examples = []
    for rep in reports:
        traj = by_id.get(rep.trajectory_id)
        if traj is None:
            raise DataError(f"report {rep.report_id}: trajectory {rep.trajectory_id} not found in the trajectories")
        if (traj.task_id, traj.task_hash) != (rep.task_id, rep.task_hash):
            raise DataError(
                f"report {rep.report_id}: task {rep.task_id}@{rep.task_hash[:12]} but trajectory "
                f"{traj.trajectory_id} is {traj.task_id}@{traj.task_hash[:12]}"
            )
        examples.append(Example(trajectory=traj, report=rep, round=round_key))
    return examples


def by_task(examples: list[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = defaultdict(list)
    for ex in sorted(examples, key=lambda e: e.trajectory.trajectory_id):
        groups[ex.trajectory.task_id].append(ex)
    return dict(sorted(groups.items()))


# ---------------------------------------------------------------- chat helpers


def trl_messages(messages: list[dict[str, Any]], strict: bool = True) -> list[dict[str, Any]]:
    """OpenAI chat messages -> TRL's conversational tool format: tool-call
    `arguments` as objects (the Qwen2.5 template renders them with `tojson`),
    `content` always a string. Arguments that are not a JSON object raise
    DataError (the template could not render them as the model wrote them),
    or with `strict=False` are kept as the raw string, for data (RL rows of
    malformed runs) that records what the model did rather than renders it."""
    out = []
    for i, msg in enumerate(messages):
        new = {"role": msg["role"], "content": msg.get("content") or ""}
        if msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                fn = call["function"]
                args = fn.get("arguments") or "{}"
                try:
                    parsed = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    parsed = None
                if not isinstance(parsed, dict) and not strict:
                    parsed = args
                elif not isinstance(parsed, dict):
                    raise DataError(
                        f"message {i}: tool call {fn.get('name')!r} has arguments that are not a JSON object"
                    )
                calls.append(
                    {"id": call.get("id"), "type": "function", "function": {"name": fn["name"], "arguments": parsed}}
                )
            new["tool_calls"] = calls
        if msg.get("tool_call_id"):
            new["tool_call_id"] = msg["tool_call_id"]
        out.append(new)
    return out


def split_prompt(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages before the first assistant turn, the rest)."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return messages[:first], messages[first:]


def n_tokens(traj: Trajectory) -> int:
    """Exact length when token ids were recorded (last prompt + its completion),
    else an estimate of 1 token per 4 characters of the chat and tool schemas
    (code tokenizes denser with small vocabularies; trainers cut or skip by
    exact length)."""
    last = traj.turns[-1] if traj.turns else None
    if last is not None and last.prompt_ids is not None and last.completion_ids is not None:
        return len(last.prompt_ids) + len(last.completion_ids)
    chars = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or "")) for m in traj.messages)
    return (chars + len(json.dumps(traj.tools))) // 4 + 1
