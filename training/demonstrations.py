"""Reference demonstrations of level-0 and level-1 tasks: the task's own fix, written the way the text
tool protocol asks a model to write it, run in the sandbox like any policy's runs so the
verifier grades them.

Privileged (the answer comes from the task's reference) and labelled: the runs' policy is
`replay:reference-fix`, so their training rows count as `other`, never as the model's. A
brief warm start on them (`WarmStartConfig.demonstrations: reference`) teaches a real base the
call format it does not write zero-shot; the scripted teacher's runs teach it poorly, since on
level 1 it searches (trial edits and test runs, 15 turns for a one-line fix).
"""

from __future__ import annotations

import json
from pathlib import Path

from touchstone.agent.policies.spec import PolicySpec
from touchstone.taskmaking.curriculum import reference_fix


class _DemonstrationEpisode:
    def __init__(self, replies: dict[str, list[str]]):
        self.replies, self.turn = replies, 0

    def act(self, messages, tools):
        from touchstone.agent.policies import PolicyTurn
        from touchstone.agent.protocol import parse_reply

        statement = next(m["content"] for m in messages if m["role"] == "user")
        script = self.replies.get(statement, ["I cannot fix this task."])
        text = script[min(self.turn, len(script) - 1)]
        self.turn += 1
        return PolicyTurn(message=parse_reply(text, self.turn - 1))


def demonstrate_fixes(tasks_dir: Path, out: Path, *, backend: str = "auto", limits=None) -> Path:
    """Reference demonstrations of level-1 tasks, run in the sandbox like any policy's runs (so
    the verifier grades them): `str_replace` of the reference fix, then `submit`, each written as
    the text tool protocol asks a model to write it. A warm start's data (privileged: the
    recorded policy is `replay:reference-fix`, so training rows count as `other`, never the model's)."""
    from touchstone.agent.loop import run_episode
    from touchstone.agent.policies import Policy
    from touchstone.agent.rollout import iter_records, record_path
    from touchstone.episode.trajectory import Sampling, atomic_write_text, stream_tables
    from touchstone.tasks.schema import load_task_set

    def call(name: str, arguments: dict) -> str:
        return "<tool_call>" + json.dumps([{"name": name, "arguments": arguments}]) + "</tool_call>"

    tasks = load_task_set(tasks_dir)
    replies = {}
    for task in tasks:
        try:
            path, old, new = reference_fix(task)
        except (KeyError, ValueError):  # not a one-site mutation: its run says so and the verifier rejects it
            continue
        replies[task.statement] = [call("str_replace", {"path": path, "old": old, "new": new}), call("submit", {})]

    class DemonstrationPolicy(Policy):
        def episode(self, seed, max_turns):
            return _DemonstrationEpisode(replies)

    policy = DemonstrationPolicy(PolicySpec("replay", "reference-fix"), Sampling())
    for task in tasks:
        traj = run_episode(task, policy, backend=backend, limits=limits)
        atomic_write_text(record_path(out, traj.trajectory_id), traj.model_dump_json())
    stream_tables(lambda: iter_records(out), out)
    return out
