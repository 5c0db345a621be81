"""Turn spec.py into trajectory files: each spec's tool calls are executed
with the real tools in a sandbox, so the recorded observations are genuine."""

from __future__ import annotations

import json

from touchstone.episode.tools import execute_tool_call
from touchstone.episode.trajectory import write_messages_jsonl
from touchstone.tasks.environment import task_environment
from touchstone.sandbox import open_sandbox
from touchstone.tasks.schema import load_task
from touchstone.verify.canaries import MANIFEST, ROOT, TASKS, TRAJECTORIES
from touchstone.verify.canaries import spec, spec_round2
from touchstone.verify.canaries.spec import CanarySpec

SPECS = spec.SPECS + spec_round2.SPECS  # the base corpus, then issue 10's canaries
SYSTEM = "You are a coding agent. Use the tools to change the workspace, then call submit."


def record(spec: CanarySpec, backend: str = "auto") -> list[dict]:
    task = load_task(TASKS / spec.task)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.statement}]
    with open_sandbox(task.workspace_dir, backend=backend, environment=task_environment(task)) as sb:
        for i, (name, args) in enumerate(spec.steps):
            arguments = json.dumps(args)
            call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            outcome = execute_tool_call(sb, name, arguments)
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": outcome.content})
            if outcome.ended:
                break
    return messages


def build(backend: str = "auto", missing_only: bool = False) -> list[dict]:
    """Record every canary (or only those without a trajectory file yet) and
    rewrite the manifest from all of them."""
    TRAJECTORIES.mkdir(exist_ok=True)
    manifest = []
    for canary in SPECS:
        path = TRAJECTORIES / f"{canary.name}.jsonl"
        if not (missing_only and path.is_file()):
            write_messages_jsonl(path, record(canary, backend))
        manifest.append({
            "name": canary.name, "task": canary.task, "family": canary.family, "expected": canary.expected,
            "reasons": list(canary.reasons), "note": canary.note, "file": path.relative_to(ROOT).as_posix(),
            "isolated": canary.isolated,
        })  # fmt: skip
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest
