"""One episode: a policy works on a task in a fresh sandbox until it submits or
a budget runs out. Bad model output never raises here; it becomes an error
observation in the recorded conversation (see docs/formats/trajectory.md)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.episode.tools import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT_S,
    NO_TOOL_CALL,
    NOT_EXECUTED,
    TOOL_SCHEMAS,
    execute_tool_call,
)
from touchstone.episode.trajectory import StepRecord, Trajectory, TurnRecord, trajectory_id
from touchstone.envs import EnvError
from touchstone.tasks.environment import task_environment
from touchstone.sandbox import SandboxError, WorkspaceDiff, WorkspaceRefused, open_sandbox
from touchstone.tasks.schema import Task

SYSTEM_PROMPT = (
    "You are a software engineering agent working in a Python repository at /workspace. "
    "Fix the problem described by the user by editing files in the workspace. "
    "Use the tools: bash (run commands, e.g. the tests with `python -m pytest -q`), read_file, "
    "write_file, str_replace. Make exactly one tool call per reply. "
    "When the task is done, call submit."
)


class EpisodeLimits(BaseModel):
    """Budgets of one episode, checked between turns (a tool call is never cut
    short by the episode budget, so replay stays deterministic)."""

    model_config = ConfigDict(extra="forbid")
    max_turns: int = Field(default=50, ge=1, description="Assistant turns per episode.")
    max_total_tokens: int = Field(default=65536, ge=1)  # completion tokens over all turns
    time_budget_s: float = Field(default=900.0, gt=0, description="Wall-clock seconds per episode.")
    max_output: int = Field(default=DEFAULT_MAX_OUTPUT, ge=200)  # characters per observation
    tool_timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)  # one bash call


def _normalize_assistant(turn: PolicyTurn, turn_index: int) -> dict[str, Any]:
    """An assistant message in canonical form: string content, tool calls with ids."""
    msg = dict(turn.message)
    msg["role"] = "assistant"
    msg["content"] = msg.get("content") or ""
    calls = []
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call.get("function") or {}
        args = fn.get("arguments")
        calls.append(
            {
                "id": call.get("id") or f"call_{turn_index}_{i}",
                "type": "function",
                "function": {"name": str(fn.get("name") or ""), "arguments": args if isinstance(args, str) else ""},
            }
        )
    if calls:
        msg["tool_calls"] = calls
    else:
        msg.pop("tool_calls", None)
    return msg


class _Run:
    """Mutable state of one episode."""

    def __init__(self, task: Task, episode: Episode, limits: EpisodeLimits):
        self.task, self.episode, self.limits = task, episode, limits
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.statement},
        ]
        self.turns: list[TurnRecord] = []
        self.steps: list[StepRecord] = []
        self.tokens_used = 0
        self.policy_s = 0.0
        self.sandbox_s = 0.0
        self.error: str | None = None

    def budget_exhausted(self, started: float) -> str | None:
        if len(self.turns) >= self.limits.max_turns:
            return "max_turns"
        if self.tokens_used >= self.limits.max_total_tokens:
            return "max_tokens"
        if time.monotonic() - started >= self.limits.time_budget_s:
            return "timeout"
        return None

    def policy_turn(self) -> dict[str, Any]:
        t0 = time.monotonic()
        turn = self.episode.act(self.messages, TOOL_SCHEMAS)
        spent = time.monotonic() - t0
        self.policy_s += spent
        index = len(self.turns)
        self.turns.append(TurnRecord(turn=index, **turn.model_dump(exclude={"message"}), policy_s=round(spent, 4)))
        self.tokens_used += turn.completion_tokens or len(turn.completion_ids or []) or 0
        msg = _normalize_assistant(turn, index)
        self.messages.append(msg)
        return msg

    def execute(self, sandbox: Any, msg: dict[str, Any]) -> bool:
        """Execute the first tool call of `msg`; returns True when the episode ended."""
        calls = msg.get("tool_calls") or []
        if not calls:
            self.messages.append({"role": "user", "content": NO_TOOL_CALL})
            return False
        first = calls[0]
        t0 = time.monotonic()
        outcome = execute_tool_call(
            sandbox,
            first["function"]["name"],
            first["function"]["arguments"],
            max_output=self.limits.max_output,
            timeout=self.limits.tool_timeout_s,
        )
        spent = time.monotonic() - t0
        self.sandbox_s += spent
        self.steps.append(
            StepRecord(
                step=len(self.steps),
                turn=len(self.turns) - 1,
                tool_call_id=first["id"],
                tool=first["function"]["name"],
                arguments=first["function"]["arguments"],
                ok=outcome.ok,
                ended=outcome.ended,
                exit_code=outcome.exit_code,
                output_chars=len(outcome.content),
                duration_s=round(spent, 4),
            )
        )
        self.messages.append({"role": "tool", "tool_call_id": first["id"], "content": outcome.content})
        for extra in calls[1:]:
            self.messages.append({"role": "tool", "tool_call_id": extra["id"], "content": NOT_EXECUTED})
        return outcome.ended

    def play(self, sandbox: Any, started: float) -> str:
        """Turns until an exit reason; returns it."""
        while True:
            reason = self.budget_exhausted(started)
            if reason:
                return reason
            try:
                msg = self.policy_turn()
            except Exception as exc:  # noqa: BLE001 - one broken turn must not kill a batch
                kind = "" if isinstance(exc, PolicyError) else f"{type(exc).__name__}: "
                self.error = f"policy error: {kind}{exc}"
                return "policy_error"
            try:
                if self.execute(sandbox, msg):
                    return "submitted"
            except SandboxError as exc:
                self.error = f"sandbox error: {exc}"
                return "sandbox_error"


def run_episode(
    task: Task,
    policy: Policy,
    *,
    attempt: int = 0,
    backend: str = "auto",
    limits: EpisodeLimits | None = None,
    action_log: Path | None = None,
) -> Trajectory:
    """Run one attempt of `policy` on `task` in a fresh sandbox and record it.

    Never raises for bad model output; policy and sandbox failures end the
    episode with exit reason `policy_error` / `sandbox_error`, and a workspace
    the harness refuses to walk (the agent's doing) with `workspace_refused`."""
    limits = limits or EpisodeLimits()
    seed = policy.sampling.attempt_seed(attempt)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    run = _Run(task, policy.episode(seed, max_turns=limits.max_turns), limits)
    backend_name, digest, env_digest, diff = backend, None, None, WorkspaceDiff()
    try:
        environment = task_environment(task)
        with open_sandbox(task.workspace_dir, backend=backend, action_log=action_log, environment=environment) as sb:
            backend_name, digest, env_digest = sb.backend, sb.image_digest, sb.environment_digest
            exit_reason = run.play(sb, started)
            try:
                diff = sb.diff()
            except WorkspaceRefused as exc:  # the tree the agent left: its outcome, not the sandbox's failure
                exit_reason, run.error = "workspace_refused", f"workspace refused: {exc}"
    except (SandboxError, EnvError) as exc:
        exit_reason, run.error = "sandbox_error", f"sandbox error: {exc}"
    task_hash = task.content_hash
    return Trajectory(
        trajectory_id=trajectory_id(task.id, task_hash, policy.identity, attempt, seed),
        task_id=task.id,
        task_hash=task_hash,
        attempt=attempt,
        policy=str(policy.spec),
        checkpoint_hash=policy.checkpoint_hash,
        sampling=policy.sampling.model_copy(update={"seed": seed}),
        backend=backend_name,
        image_digest=digest,
        environment_digest=env_digest,
        messages=run.messages,
        tools=TOOL_SCHEMAS,
        turns=run.turns,
        steps=run.steps,
        exit_reason=exit_reason,
        error=run.error,
        diff=diff,
        started_at=started_at,
        wall_s=round(time.monotonic() - started, 4),
        policy_s=round(run.policy_s, 4),
        sandbox_s=round(run.sandbox_s, 4),
        touchstone_version=version("touchstone"),
    )
