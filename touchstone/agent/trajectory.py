"""The trajectory record: what one policy did on one task, exactly.

Two forms, documented in docs/formats/trajectory.md:
- file form: JSONL of OpenAI chat messages (one message per line), the format
  training libraries and other agents speak;
- table form: `trajectories.parquet` (one row per trajectory, all metadata) and
  `steps.parquet` (one row per executed tool call).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from touchstone import atomic

ExitReason = Literal["submitted", "max_turns", "max_tokens", "timeout", "policy_error", "sandbox_error"]
EXIT_REASONS: tuple[str, ...] = ExitReason.__args__  # type: ignore[attr-defined]


class TrajectoryError(ValueError):
    """A trajectory file or row that does not follow the documented format."""


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str  # a JSON string, as the model produced it (may be malformed)


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One OpenAI chat message. Extra keys (e.g. `reasoning_content`) are kept."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Any] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class Sampling(BaseModel):
    """Sampling parameters, passed to policies separately from the spec."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 512  # per assistant turn
    seed: int = 0


class TurnRecord(BaseModel):
    """One assistant turn as the policy produced it. Token ids are exact (no re-tokenization)."""

    turn: int
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None  # one per completion token, as sampled
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    policy_s: float = 0.0


class StepRecord(BaseModel):
    """One executed tool call (see `executed_tool_calls` for which calls execute)."""

    step: int
    turn: int
    tool_call_id: str
    tool: str
    arguments: str
    ok: bool
    ended: bool
    exit_code: int | None = None
    output_chars: int
    duration_s: float


class DiffRecord(BaseModel):
    """Final workspace diff, computed by the harness from the sandbox, never by the agent."""

    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    patch: str = ""


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trajectory_id: str
    task_id: str
    task_hash: str
    attempt: int
    policy: str
    checkpoint_hash: str | None = None
    sampling: Sampling
    backend: str
    image_digest: str | None = None
    environment_digest: str | None = None  # the task environment it ran in (None: base)
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[TurnRecord] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    exit_reason: ExitReason
    error: str | None = None
    diff: DiffRecord = Field(default_factory=DiffRecord)
    started_at: str  # ISO 8601 UTC
    wall_s: float
    policy_s: float
    sandbox_s: float
    touchstone_version: str

    def to_row(self) -> dict[str, Any]:
        """The `trajectories.parquet` row."""
        s = self.sampling
        return {
            "trajectory_id": self.trajectory_id,
            "task_id": self.task_id,
            "task_hash": self.task_hash,
            "attempt": self.attempt,
            "policy": self.policy,
            "checkpoint_hash": self.checkpoint_hash,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": s.seed,
            "backend": self.backend,
            "image_digest": self.image_digest,
            "environment_digest": self.environment_digest,
            "messages": json.dumps(self.messages, ensure_ascii=False),
            "tools": json.dumps(self.tools, ensure_ascii=False),
            "turns": json.dumps([t.model_dump() for t in self.turns]),
            "n_turns": len(self.turns),
            "n_steps": len(self.steps),
            "exit_reason": self.exit_reason,
            "error": self.error,
            "diff_created": self.diff.created,
            "diff_modified": self.diff.modified,
            "diff_deleted": self.diff.deleted,
            "diff_patch": self.diff.patch,
            "started_at": self.started_at,
            "wall_s": self.wall_s,
            "policy_s": self.policy_s,
            "sandbox_s": self.sandbox_s,
            "touchstone_version": self.touchstone_version,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any], steps: Iterable[dict[str, Any]] = ()) -> "Trajectory":
        """Inverse of `to_row` (+ the trajectory's rows of `steps.parquet`)."""
        try:
            return cls(
                trajectory_id=row["trajectory_id"],
                task_id=row["task_id"],
                task_hash=row["task_hash"],
                attempt=row["attempt"],
                policy=row["policy"],
                checkpoint_hash=row["checkpoint_hash"],
                sampling=Sampling(**{k: row[k] for k in ("temperature", "top_p", "max_tokens", "seed")}),
                backend=row["backend"],
                image_digest=row["image_digest"],
                environment_digest=row.get("environment_digest"),
                messages=json.loads(row["messages"]),
                tools=json.loads(row["tools"]),
                turns=json.loads(row["turns"]),
                steps=[{k: v for k, v in s.items() if k not in ("trajectory_id", "task_id")} for s in steps],
                exit_reason=row["exit_reason"],
                error=row["error"],
                diff=DiffRecord(
                    created=row["diff_created"],
                    modified=row["diff_modified"],
                    deleted=row["diff_deleted"],
                    patch=row["diff_patch"],
                ),
                started_at=row["started_at"],
                wall_s=row["wall_s"],
                policy_s=row["policy_s"],
                sandbox_s=row["sandbox_s"],
                touchstone_version=row["touchstone_version"],
            )
        except (KeyError, ValidationError, json.JSONDecodeError) as exc:
            raise TrajectoryError(f"trajectory row {row.get('trajectory_id')!r} is malformed: {exc}") from exc

    def step_rows(self) -> list[dict[str, Any]]:
        """The trajectory's rows of `steps.parquet`."""
        return [{"trajectory_id": self.trajectory_id, "task_id": self.task_id, **s.model_dump()} for s in self.steps]


def trajectory_id(task_id: str, task_hash: str, policy: str, attempt: int, seed: int) -> str:
    """Deterministic id of an attempt, so a resumed rollout recognizes finished work."""
    key = json.dumps([task_id, task_hash, policy, attempt, seed])
    return "t-" + hashlib.sha256(key.encode()).hexdigest()[:20]


# ---------------------------------------------------------------- file form


def validate_messages(messages: list[dict[str, Any]], source: str = "messages") -> None:
    """Raise `TrajectoryError` naming the first message that is not an OpenAI chat message."""
    for i, msg in enumerate(messages):
        try:
            Message.model_validate(msg)
        except ValidationError as exc:
            raise TrajectoryError(f"{source}: message {i} is not an OpenAI chat message: {exc}") from None
        if msg["role"] == "tool" and not msg.get("tool_call_id"):
            raise TrajectoryError(f"{source}: message {i} (role tool) has no tool_call_id")


atomic_write_text = atomic.write_text  # the name the agent's modules use


def write_messages_jsonl(path: str | Path, messages: list[dict[str, Any]]) -> Path:
    """Write messages, one JSON object per line, atomically."""
    path = Path(path)
    validate_messages(messages, str(path))
    atomic_write_text(path, "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages))
    return path


def read_messages_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a messages JSONL file (ours or another agent's)."""
    path = Path(path)
    messages = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(f"{path}:{lineno}: not valid JSON: {exc}") from None
        if not isinstance(msg, dict):
            raise TrajectoryError(f"{path}:{lineno}: expected a JSON object, got {type(msg).__name__}")
        messages.append(msg)
    validate_messages(messages, str(path))
    return messages


# ---------------------------------------------------------------- replay rule


class ExecutedCall(BaseModel):
    """A tool call that the harness executed, with the observation it recorded."""

    turn: int
    step: int
    tool_call_id: str
    name: str
    arguments: str
    recorded_output: str | None  # content of the matching tool message, None if absent


def executed_tool_calls(messages: list[dict[str, Any]]) -> list[ExecutedCall]:
    """The tool calls that were executed, in order — the rule replay must follow.

    In each assistant message only the FIRST tool call is executed; any further
    call of the same message gets an error observation without being executed.
    Nothing after an executed `submit` is executed."""
    outputs = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls: list[ExecutedCall] = []
    turn = -1
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        turn += 1
        tool_calls = msg.get("tool_calls") or []
        if not tool_calls:
            continue
        first = tool_calls[0]
        fn = first.get("function", {})
        calls.append(
            ExecutedCall(
                turn=turn,
                step=len(calls),
                tool_call_id=first.get("id", ""),
                name=fn.get("name", ""),
                arguments=fn.get("arguments") or "",
                recorded_output=outputs.get(first.get("id")),
            )
        )
        if fn.get("name") == "submit":
            break
    return calls


# ---------------------------------------------------------------- table form

TRAJECTORIES_FILE = "trajectories.parquet"
STEPS_FILE = "steps.parquet"

_STEP_SCHEMA = {
    "trajectory_id": pl.String,
    "task_id": pl.String,
    "step": pl.Int64,
    "turn": pl.Int64,
    "tool_call_id": pl.String,
    "tool": pl.String,
    "arguments": pl.String,
    "ok": pl.Boolean,
    "ended": pl.Boolean,
    "exit_code": pl.Int64,
    "output_chars": pl.Int64,
    "duration_s": pl.Float64,
}
_TRAJ_SCHEMA = {
    "trajectory_id": pl.String,
    "task_id": pl.String,
    "task_hash": pl.String,
    "attempt": pl.Int64,
    "policy": pl.String,
    "checkpoint_hash": pl.String,
    "temperature": pl.Float64,
    "top_p": pl.Float64,
    "max_tokens": pl.Int64,
    "seed": pl.Int64,
    "backend": pl.String,
    "image_digest": pl.String,
    "environment_digest": pl.String,
    "messages": pl.String,
    "tools": pl.String,
    "turns": pl.String,
    "n_turns": pl.Int64,
    "n_steps": pl.Int64,
    "exit_reason": pl.String,
    "error": pl.String,
    "diff_created": pl.List(pl.String),
    "diff_modified": pl.List(pl.String),
    "diff_deleted": pl.List(pl.String),
    "diff_patch": pl.String,
    "started_at": pl.String,
    "wall_s": pl.Float64,
    "policy_s": pl.Float64,
    "sandbox_s": pl.Float64,
    "touchstone_version": pl.String,
}


def write_tables(trajectories: list[Trajectory], out: str | Path) -> tuple[Path, Path]:
    """Write `OUT/trajectories.parquet` and `OUT/steps.parquet` (sorted by id, atomically)."""
    ordered = sorted(trajectories, key=lambda t: t.trajectory_id)
    return stream_tables(lambda: ordered, out)


def stream_tables(trajectories: Callable[[], Iterable[Trajectory]], out: str | Path) -> tuple[Path, Path]:
    """The table form of the trajectories `trajectories()` yields, in that order
    (called once per table), written a row group at a time: from a generator
    (`rollout.iter_records`), memory stays flat in the number of trajectories."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_parquet_rows((t.to_row() for t in trajectories()), out / TRAJECTORIES_FILE, _TRAJ_SCHEMA)
    steps = (row for t in trajectories() for row in t.step_rows())
    atomic.write_parquet_rows(steps, out / STEPS_FILE, _STEP_SCHEMA)
    return out / TRAJECTORIES_FILE, out / STEPS_FILE


def read_tables(out: str | Path) -> list[Trajectory]:
    """Read the table form back into `Trajectory` records."""
    out = Path(out)
    rows = pl.read_parquet(out / TRAJECTORIES_FILE).to_dicts()
    steps_by_id: dict[str, list[dict[str, Any]]] = {}
    for s in pl.read_parquet(out / STEPS_FILE).sort("trajectory_id", "step").to_dicts():
        steps_by_id.setdefault(s["trajectory_id"], []).append(s)
    return [Trajectory.from_row(r, steps_by_id.get(r["trajectory_id"], [])) for r in rows]
