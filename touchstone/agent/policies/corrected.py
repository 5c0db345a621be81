"""The `corrected:SPEC` policy: the scripted teacher acts, and before each of its
actions the learner (the policy SPEC, e.g. `hf:PATH`) is sampled at the same
state. A learner turn whose call is malformed stays in the trajectory, with the
error observation the loop answers it with, and the teacher's action follows; a
well-formed one is dropped and the teacher's action takes its place. So the
trajectory visits the states the learner's own mistakes lead to, and every
action taken there is the teacher's: DAgger-style data for a model that has to
learn to go on after an error (docs/EXPERIMENTS.md, 2026-12-04 evening).

By construction nothing the learner writes runs: a malformed call is never
executed (`touchstone.episode.tools.is_valid_call`), so the workspace, the
verifier's replay and the grade hold the teacher's actions only, and the SFT
builder never trains on a malformed call (`touchstone.data.sft`). The episode's
turn budget counts both: the teacher plans with half of it, as it would alone.
"""

from __future__ import annotations

from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyTurn, make_policy
from touchstone.agent.policies.spec import TEACHER, PolicySpec
from touchstone.episode.tools import is_valid_call
from touchstone.episode.trajectory import Sampling


def episode_turns(teacher_turns: int) -> int:
    """A corrected episode's turn budget: at most one learner turn precedes each of the teacher's."""
    return 2 * teacher_turns


def teacher_turns(max_turns: int) -> int:
    """The teacher's share of a corrected episode's turns (the inverse of `episode_turns`)."""
    return max(1, max_turns // 2)


class _CorrectedEpisode(Episode):
    def __init__(self, policy: "CorrectedPolicy", seed: int, max_turns: int):
        self.policy, self.seed, self.max_turns = policy, seed, max_turns
        self.teacher = policy.teacher.episode(seed, teacher_turns(max_turns))
        self.consulted = 0
        # When the learner has just erred: how many messages the teacher has seen (up
        # to its own last observation); the learner's turn and its error are not its.
        self.seen: int | None = None

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        if self.seen is None:
            # A fresh learner episode per state: its view is the recorded conversation,
            # never a sample that was dropped. Seeded per consultation: reproducible.
            learner = self.policy.learner.episode(self.seed * 1009 + self.consulted, self.max_turns)
            self.consulted += 1
            turn = learner.act(messages, tools)
            if not is_valid_call(turn.message):
                self.seen = len(messages)
                return _renumbered(turn, self.consulted)
            seen = len(messages)
        else:
            seen = self.seen
        self.seen = None
        return self.teacher.act(messages[:seen], tools)


def _renumbered(turn: PolicyTurn, consulted: int) -> PolicyTurn:
    """The learner's turn with call ids unique in the episode (each fresh learner episode starts at turn 0)."""
    calls = [{**c, "id": f"learner_{consulted}_{i}"} for i, c in enumerate(turn.message.get("tool_calls") or [])]
    message = {**turn.message, "tool_calls": calls} if calls else turn.message
    return turn.model_copy(update={"message": message})


class CorrectedPolicy(Policy):
    """The teacher corrects the learner named after `corrected:`; sampling is the learner's."""

    def __init__(self, spec: PolicySpec, sampling: Sampling):
        super().__init__(spec, sampling)
        self.learner = make_policy(spec.learner, sampling)
        self.teacher = make_policy(TEACHER, sampling)
        self.checkpoint_hash = self.learner.checkpoint_hash

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _CorrectedEpisode(self, seed, max_turns)

    def close(self) -> None:
        self.learner.close()
