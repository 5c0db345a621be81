"""Isolated execution of untrusted code (agent actions, tests) for every stage.

    with open_sandbox(workspace_dir, backend="auto") as sb:
        result = sb.exec("python -m pytest -q", timeout=60)

Contract: docs/ARCHITECTURE.md; record formats: docs/formats/sandbox.md."""

from touchstone.sandbox.action_log import ActionRecord, read_action_log
from touchstone.sandbox.base import BASE_ENV, ExecResult, Limits, Mount, Sandbox, parse_size
from touchstone.sandbox.docker import WarmPool
from touchstone.sandbox.environment import ENV_TARGET, Environment
from touchstone.sandbox.errors import SandboxError, SandboxWarning, WorkspaceRefused
from touchstone.sandbox.hostids import HostUser
from touchstone.sandbox.factory import BACKENDS, DEFAULT_BACKEND, available_backends, open_sandbox, resolve_backend
from touchstone.sandbox.workspace import WorkspaceDiff, is_regular

__all__ = [
    "BACKENDS",
    "BASE_ENV",
    "DEFAULT_BACKEND",
    "ENV_TARGET",
    "Environment",
    "ActionRecord",
    "ExecResult",
    "HostUser",
    "Limits",
    "Mount",
    "Sandbox",
    "SandboxError",
    "SandboxWarning",
    "WarmPool",
    "WorkspaceDiff",
    "WorkspaceRefused",
    "available_backends",
    "is_regular",
    "open_sandbox",
    "parse_size",
    "read_action_log",
    "resolve_backend",
]
