"""A bare patch (a SWE-bench `model_patch`) as a one-step trajectory, so that
predictions from any agent are graded by the same verifier as Touchstone's
own: one `bash` call that applies the patch with `git apply` in the sandbox,
then `submit`. The replay runs that call for real, so what is graded is what
the patch does to the workspace. A patch that does not apply to the task's
workspace is refused before that (`PatchError`): graded, it would grade the
untouched tree."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from touchstone.harness import compose_tree
from touchstone.tasks.schema import Task

SYSTEM = "Predictions imported as a patch (touchstone verify --patch)."


def apply_command(patch: str) -> str:
    """`git apply` of `patch` from a here-document whose delimiter the patch cannot contain."""
    delimiter = "TOUCHSTONE_PATCH_" + hashlib.sha256(patch.encode()).hexdigest()[:16]
    body = patch if patch.endswith("\n") else patch + "\n"
    return f"git apply --whitespace=nowarn - <<'{delimiter}'\n{body}{delimiter}"


def patch_trajectory(task: Task, patch: str) -> list[dict[str, Any]]:
    """OpenAI chat messages: statement, one bash call applying the patch, submit.
    Raises `PatchError` (git's reason) when the patch does not apply to the
    task's workspace."""
    with tempfile.TemporaryDirectory(prefix="touchstone-patch-") as tmp:
        compose_tree(Path(tmp), task.workspace_dir, patch=patch)
    calls = [("bash", {"command": apply_command(patch)}), ("submit", {})]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task.statement},
    ]
    for i, (name, args) in enumerate(calls):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    return messages
