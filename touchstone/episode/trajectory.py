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
from typing import Annotated, Any, Callable, Iterable, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from touchstone import atomic, tables
from touchstone.episode.precision import resolve_sampling_dtype
from touchstone.sandbox.workspace import WorkspaceDiff
from touchstone.tables import Apart, Flat, Json, count

# workspace_refused: the agent left a tree the harness will not walk (over the workspace limits...):
# its outcome, a failed episode; sandbox_error: the sandbox itself failed (infrastructure)
ExitReason = Literal[
    "submitted", "max_turns", "max_tokens", "timeout", "policy_error", "workspace_refused", "sandbox_error"
]
EXIT_REASONS: tuple[str, ...] = ExitReason.__args__  # type: ignore[attr-defined]
# an hf: policy's weights while it samples (Sampling.dtype); "auto" is resolved when a Sampling is made
SamplingDtype = Literal["float32", "bfloat16", "auto"]
STEP_KEYS = ("trajectory_id", "task_id")  # the columns that tie a row of steps.parquet to its trajectory


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


def turn_seed(episode_seed: int, turn: int) -> int:
    """The seed turn `turn` of the episode seeded `episode_seed` samples from."""
    return episode_seed * 100003 + turn


class Sampling(BaseModel):
    """Sampling parameters, passed to policies separately from the spec."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.7, description="Sampling temperature.")
    top_p: float = Field(1.0, description="Nucleus sampling: the most likely tokens whose probabilities reach this.")
    max_tokens: int = Field(512, description="Completion tokens per assistant turn (cluster: 4096).")
    seed: int = Field(0, description="Base sampling seed; attempt i samples with seed + i.")
    # A longer conversation keeps its latest tokens (`prompt_window`); a served model's context
    # is its server's business. Why: a model trained on windows of N tokens
    # (training.sft.turn_windows) never acted further than N tokens into a context.
    context_window: int = Field(
        0,
        ge=0,
        description="hf: policies: tokens per turn, prompt and completion together (the latest kept); "
        "match the trainer's max_length. 0: the whole conversation.",
    )

    # The precision an hf: policy's weights compute in while it samples (the checkpoint keeps its
    # own; training is unaffected). bfloat16 on a CPU with AMX (`lscpu`: amx_bf16) or a GPU: a task's
    # first turns took 0.65x the time on a 2-core Xeon (docs/BENCHMARKS.md); without AMX or
    # AVX512-BF16 expect it slower. A seed samples differently in the two: a study keeps one.
    # "auto" becomes one of the two here (touchstone.episode.precision), so a record never says "auto".
    dtype: SamplingDtype = Field(
        "float32",
        description="hf: policies: the weights' precision while sampling (bfloat16: CPUs with AMX, GPUs; "
        "auto: bfloat16 where this machine computes it natively, else float32).",
    )

    @field_validator("dtype")
    @classmethod
    def _resolve_auto(cls, dtype: str) -> str:
        return resolve_sampling_dtype(dtype)

    def attempt_seed(self, attempt: int) -> int:
        """The seed attempt `attempt` of a task samples from."""
        return self.seed + attempt

    def prompt_window(self) -> int | None:
        """Prompt tokens kept (the latest), or None for all: the context window less
        the completion's tokens, but never less than half the window."""
        if not self.context_window:
            return None
        return self.context_window - min(self.max_tokens, self.context_window // 2)


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
    record: dict[str, Any] | None = None  # the policy's own account of the turn (PolicyTurn.record)


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


class Trajectory(BaseModel):
    """One attempt. Its table form (`trajectories.parquet`) is derived from these
    fields (`touchstone.tables`): `sampling` and `diff` flattened into columns,
    chat and turns as JSON text, `steps` in `steps.parquet`."""

    model_config = ConfigDict(extra="forbid")
    trajectory_id: str
    task_id: str
    task_hash: str
    attempt: int
    policy: str
    checkpoint_hash: str | None = None
    sampling: Annotated[Sampling, Flat()]
    backend: str
    image_digest: str | None = None
    environment_digest: str | None = None  # the task environment it ran in (None: base)
    messages: Annotated[list[dict[str, Any]], Json()]
    tools: Annotated[list[dict[str, Any]], Json()]
    turns: Annotated[list[TurnRecord], Json(), count("n_turns")] = Field(default_factory=list)
    steps: Annotated[list[StepRecord], Apart(), count("n_steps")] = Field(default_factory=list)
    exit_reason: ExitReason
    error: str | None = None
    # the final workspace diff, computed by the harness from the sandbox, never by the agent
    diff: Annotated[WorkspaceDiff, Flat("diff_")] = Field(default_factory=WorkspaceDiff)
    # False: no harness of ours watched the workspace (an imported run), so `diff` is empty for
    # want of a record, and the verifier skips its recorded-diff check instead of comparing
    harness_diff: bool = True
    started_at: str  # ISO 8601 UTC
    wall_s: float
    policy_s: float
    sandbox_s: float
    touchstone_version: str

    def to_row(self) -> dict[str, Any]:
        """The `trajectories.parquet` row."""
        return tables.to_row(self)

    @classmethod
    def from_row(cls, row: dict[str, Any], steps: Iterable[dict[str, Any]] = ()) -> "Trajectory":
        """Inverse of `to_row` (+ the trajectory's rows of `steps.parquet`)."""
        try:
            steps = [{k: v for k, v in s.items() if k not in STEP_KEYS} for s in steps]
            return cls.model_validate({**tables.from_row(cls, row), "steps": steps})
        except (ValidationError, json.JSONDecodeError) as exc:
            raise TrajectoryError(f"trajectory row {row.get('trajectory_id')!r} is malformed: {exc}") from exc

    def step_rows(self) -> list[dict[str, Any]]:
        """The trajectory's rows of `steps.parquet`."""
        keys = {k: getattr(self, k) for k in STEP_KEYS}
        return [{**keys, **s.model_dump()} for s in self.steps]


def trajectory_id(task_id: str, task_hash: str, policy: str, attempt: int, seed: int) -> str:
    """Deterministic id of an attempt, so a resumed rollout recognizes finished work.
    `policy` names the policy by content (`Policy.identity`: its weights' hash where it has
    weights), never by a path, so the same rows get the same ids under any data root."""
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


def read_text(path: Path, expected: str) -> str:
    """A run file's text; a binary or non-UTF-8 file is refused naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TrajectoryError(
            f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start}); {expected}: give that file instead"
        ) from None


def read_messages_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a messages JSONL file (ours or another agent's)."""
    path = Path(path)
    messages = []
    for lineno, line in enumerate(read_text(path, "a trajectory is JSONL of chat messages").splitlines(), 1):
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

_TRAJ_SCHEMA = tables.polars_schema(Trajectory)
_STEP_SCHEMA = {k: _TRAJ_SCHEMA[k] for k in STEP_KEYS} | tables.polars_schema(StepRecord)


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
