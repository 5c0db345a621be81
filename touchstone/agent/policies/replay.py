"""The `replay:PATH` policy: answers with recorded model outputs, so a round
(or a self-play proposal step) can run on what a real model once said where no
model can run. PATH is a JSON list whose items are output strings or objects
with an `output` string (the format of the proposer's recorded-output
fixtures); episode `seed` answers item `seed % len(items)`, every turn of that
episode the same text. It produces text only (no tool calls, no token ids).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.agent.policies.spec import PolicySpec


def read_outputs(path: Path) -> list[str]:
    """The recorded outputs of `path`; a clear error for anything else."""
    try:
        items = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"replay policy: cannot read {path}: {exc}") from None
    if not isinstance(items, list) or not items:
        raise ValueError(f"replay policy: {path} must hold a non-empty JSON list of outputs")
    outputs = []
    for i, item in enumerate(items):
        text = item.get("output") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ValueError(f"replay policy: {path} item {i} is neither a string nor an object with 'output'")
        outputs.append(text)
    return outputs


class ReplayEpisode(Episode):
    def __init__(self, text: str):
        self.text = text

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        if not messages:
            raise PolicyError("replay policy: no messages to answer")
        return PolicyTurn(message={"role": "assistant", "content": self.text}, finish_reason="stop")


class ReplayPolicy(Policy):
    def __init__(self, spec: PolicySpec, sampling):
        super().__init__(spec, sampling)
        self.outputs = read_outputs(spec.path)

    def episode(self, seed: int, max_turns: int) -> Episode:
        return ReplayEpisode(self.outputs[seed % len(self.outputs)])
