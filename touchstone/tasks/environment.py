"""A task's environment: resolved from task.json and built (or found in the cache)."""

from __future__ import annotations

from touchstone.envs.build import build_env
from touchstone.envs.spec import EnvError, EnvSpec, resolve
from touchstone.sandbox import Environment
from touchstone.tasks.schema import Task, TaskError


def task_spec(task: Task) -> EnvSpec | None:
    """The task's environment spec (None: the base environment)."""
    try:
        return resolve(task.environment, task.dir)
    except EnvError as exc:
        raise TaskError(task.dir / "task.json", f"environment: {exc}") from None


def task_environment(task: Task) -> Environment | None:
    """What every sandbox that runs `task` mounts: built on first use (the only
    step with the network on), then reused by digest. None: the base environment."""
    spec = task_spec(task)
    if spec is None:
        return None
    return build_env(spec, task.workspace_dir if spec.setup else None).sandbox_environment()
