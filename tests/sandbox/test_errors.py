"""Bad input gets a clear error naming the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from touchstone.sandbox import Limits, Mount, SandboxError, open_sandbox


def test_missing_workspace(tmp_path: Path, sandbox_backend: str):
    with pytest.raises(SandboxError, match="workspace directory does not exist: .*nowhere"):
        open_sandbox(tmp_path / "nowhere", sandbox_backend)


def test_unknown_backend(workspace: Path):
    with pytest.raises(SandboxError, match="unknown sandbox backend 'podman'"):
        open_sandbox(workspace, "podman")


def test_bad_limits_and_mounts(tmp_path: Path):
    with pytest.raises(ValueError, match="not a size"):
        Limits(memory_bytes="lots")
    with pytest.raises(ValueError, match="must be positive"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="mount source does not exist"):
        Mount(host=tmp_path / "missing", target="/mnt/x")
    with pytest.raises(ValueError, match="under /mnt/ or /workspace/"):
        Mount(host=tmp_path, target="/etc/x")


def test_closed_sandbox_refuses_use(workspace: Path, sandbox_backend: str):
    box = open_sandbox(workspace, sandbox_backend)
    box.close()
    box.close()  # idempotent
    with pytest.raises(SandboxError, match="is closed"):
        box.exec("true")
