"""Choosing and opening a backend. `auto` means Docker when its daemon answers and
the sandbox image is built, else bubblewrap; never unsandboxed execution."""

from __future__ import annotations

import os
import shutil
from typing import Sequence

from touchstone.sandbox.base import Limits, Mount, Sandbox
from touchstone.sandbox.environment import Environment
from touchstone.sandbox.errors import SandboxError
from touchstone.sandbox.hostids import HostUser

BACKENDS = ("auto", "docker", "bwrap")
DEFAULT_BACKEND = "auto"  # what the command line and a round use unless told otherwise


def resolve_backend(name: str) -> str:
    """The concrete backend ("docker" or "bwrap") a name selects here."""
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    from touchstone.sandbox.docker import docker_unavailable_reason

    return "docker" if docker_unavailable_reason() is None else "bwrap"


def available_backends() -> list[str]:
    """Concrete backends usable on this machine right now (image/rootfs built)."""
    from touchstone.sandbox.docker import docker_unavailable_reason
    from touchstone.sandbox.image import rootfs_ready

    found = []
    if shutil.which("bwrap") and (rootfs_ready() or os.geteuid() == 0):
        found.append("bwrap")
    if docker_unavailable_reason() is None:
        found.append("docker")
    return found


def open_sandbox(
    workspace: str | os.PathLike,
    backend: str = "auto",
    *,
    limits: Limits | None = None,
    mounts: Sequence[Mount] = (),
    action_log: str | os.PathLike | None = None,
    environment: Environment | None = None,
    host_user: HostUser | None = None,
) -> Sandbox:
    """A started sandbox around a private copy of `workspace` (use it with `with`).
    `environment`: a built task environment (`touchstone.envs`), mounted read-only
    at /usr/local; None = the base environment. `host_user`: a host uid shared
    with other sandboxes that must share files (`HostUser.acquire()`); None: one
    of its own."""
    concrete = resolve_backend(backend)
    if concrete == "docker":
        from touchstone.sandbox.docker import DockerSandbox as cls
    else:
        from touchstone.sandbox.bwrap import BwrapSandbox as cls
    return cls(
        workspace, limits=limits, mounts=mounts, action_log=action_log, environment=environment, host_user=host_user
    )
