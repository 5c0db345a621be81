"""The `teacher` policy: the deterministic repair procedure of
`touchstone.agent.teacher`, spoken as chat turns with one tool call each."""

from __future__ import annotations

import json
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyTurn
from touchstone.agent.teacher import Action, Procedure, repair


def action_message(action: Action, index: int) -> dict[str, Any]:
    """`action` as the assistant message of the episode's `index`-th call."""
    call = {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": action.tool, "arguments": json.dumps(action.args)},
    }
    return {"role": "assistant", "content": action.thought, "tool_calls": [call]}


class _TeacherEpisode(Episode):
    def __init__(self, max_turns: int):
        self.max_turns = max_turns
        self.procedure: Procedure | None = None
        self.calls = 0

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        try:
            if self.procedure is None:
                statement = next(m["content"] for m in messages if m["role"] == "user")
                self.procedure = repair(statement, self.max_turns)
                action = next(self.procedure)
            else:
                last = messages[-1]
                action = self.procedure.send(last.get("content") or "" if last["role"] == "tool" else "")
        except StopIteration:
            action = Action("submit", {}, "Submit.")
        self.calls += 1
        return PolicyTurn(message=action_message(action, self.calls - 1))


class TeacherPolicy(Policy):
    """Deterministic; the sampling parameters and seed are recorded but unused."""

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _TeacherEpisode(max_turns)
