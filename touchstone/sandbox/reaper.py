"""Cleanup after harnesses that died without closing their sandboxes (SIGKILL, OOM,
power loss). Their processes already died with them (PDEATHSIG chains); what can
remain is the private directory with its tmpfs workspace (memory!), empty
cgroups, and Docker containers. Each sandbox records its owner as
`PID:START_TIME`; anything whose owner is gone is removed, once per process."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

OWNER_FILE = "owner"
PREFIX = "touchstone-sandbox-"


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks


def owner_token() -> str:
    return f"{os.getpid()}:{_start_time(os.getpid())}"


def owner_alive(token: str) -> bool:
    pid, _, started = token.partition(":")
    return pid.isdigit() and _start_time(int(pid)) == started


@functools.cache
def reap_stale_sandboxes() -> int:
    """Remove leftovers of dead harnesses; returns how many sandboxes were reaped."""
    reaped = 0
    for owner_file in Path(tempfile.gettempdir()).glob(f"{PREFIX}*/{OWNER_FILE}"):
        try:
            if owner_alive(owner_file.read_text().strip()):
                continue
        except OSError:
            continue
        sandbox_dir = owner_file.parent
        sandbox_id = sandbox_dir.name[len(PREFIX) :].split("-")[0]
        workspace = sandbox_dir / "workspace"
        if os.path.ismount(workspace):
            subprocess.run(["umount", "--lazy", str(workspace)], capture_output=True)
        shutil.rmtree(sandbox_dir, ignore_errors=True)
        for group in Path("/sys/fs/cgroup").glob(f"**/touchstone-{sandbox_id}"):
            try:
                group.rmdir()
            except OSError:
                pass
        reaped += 1
    return reaped
