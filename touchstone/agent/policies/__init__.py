"""Policies: what chooses the next assistant message.

A policy is named by a `PolicySpec` (`touchstone.agent.policies.spec`), parsed
from its text form where it enters (CLI, Dagster config): `teacher`, `hf:PATH`,
`openai:BASE_URL#MODEL`, `replay:JSON` (recorded outputs), `corrected:SPEC` (the
teacher, keeping the mistakes of the learner SPEC); sampling parameters travel
separately (`Sampling`). `make_policy(spec, sampling)` builds one.

A `Policy` is shared by concurrent episodes; `policy.episode(seed)` returns an
`Episode` holding the per-attempt state, whose `act(messages, tools)` returns
the next assistant turn. An `act` that fails raises `PolicyError` (the loop
records exit reason `policy_error`).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel

from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import Sampling


class PolicyError(RuntimeError):
    """The policy could not produce a turn (server down, generation failure, ...)."""


class PolicyTurn(BaseModel):
    """One assistant turn. `message` is an OpenAI assistant message
    (`role`, `content`, optional `tool_calls` with JSON-string arguments)."""

    message: dict[str, Any]
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    # What the policy says it did this turn, for experiments that need ground truth no filter
    # produced (the hack-prone policy: the hack family it attempted). Kept in the trajectory's
    # turn records; never shown to a model, the verifier or a dataset builder.
    record: dict[str, Any] | None = None


class Episode(ABC):
    @abstractmethod
    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        """The next assistant turn given the conversation so far."""


class Policy(ABC):
    spec: PolicySpec
    checkpoint_hash: str | None = None  # content hash of the weights, when there are any

    def __init__(self, spec: PolicySpec, sampling: Sampling):
        self.spec = spec
        self.sampling = sampling

    @property
    def identity(self) -> str:
        """The policy as trajectory ids name it: by the content of its weights where
        it has any (the same checkpoint under another data root or server address
        gives the same ids), else by its spec."""
        return f"{self.spec.scheme}@{self.checkpoint_hash}" if self.checkpoint_hash else str(self.spec)

    @abstractmethod
    def episode(self, seed: int, max_turns: int) -> Episode:
        """Fresh per-attempt state; `seed` makes sampling reproducible;
        `max_turns` is the episode's turn budget (a policy may plan with it)."""

    def group_attempts(self, attempts: int, concurrent: int = 1) -> None:
        """Attempts 0..attempts-1 of each task will run (each starting from the same
        conversation), up to `concurrent` episodes at a time: a policy that can sample
        their turns together does."""

    def close(self) -> None:
        """Release resources (models, clients)."""


# spec scheme -> "module:class"
_SCHEMES = {
    "teacher": "touchstone.agent.policies.teacher:TeacherPolicy",
    "hf": "touchstone.agent.policies.hf:HFPolicy",
    "openai": "touchstone.agent.policies.openai:OpenAIPolicy",
    "replay": "touchstone.agent.policies.replay:ReplayPolicy",
    # the teacher acting where a learner (any other spec) errs: DAgger-style rows
    "corrected": "touchstone.agent.policies.corrected:CorrectedPolicy",
    # the filter-ablation experiment's instrument (docs/EXPERIMENTS.md), never a default
    "hack-prone": "touchstone.agent.policies.hacks:HackPronePolicy",
}


def make_policy(spec: PolicySpec, sampling: Sampling | None = None) -> Policy:
    """Build the policy named by `spec` (parse a text form with `PolicySpec.parse`)."""
    if not isinstance(spec, PolicySpec):
        raise TypeError(f"make_policy takes a PolicySpec, got {spec!r}: parse it where it enters (PolicySpec.parse)")
    module_name, cls_name = _SCHEMES[spec.scheme].split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)  # lazy: teacher never imports torch
    return cls(spec, sampling or Sampling())
