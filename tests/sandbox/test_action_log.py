"""The action log: every harness operation recorded outside the sandbox."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from touchstone.sandbox import SandboxError, open_sandbox, read_action_log


def test_every_operation_is_logged_with_digests(sb):
    sb.exec("echo hello", env={"K": "V"})
    sb.write_file("a.txt", "data")
    sb.read_file("a.txt")
    with pytest.raises(SandboxError):
        sb.read_file("missing.txt")
    records = read_action_log(sb.action_log)
    assert [r.op for r in records] == ["exec", "write", "read", "read"]
    assert [r.seq for r in records] == [0, 1, 2, 3]
    exec_rec = records[0]
    assert exec_rec.args == {"command": "echo hello", "timeout": 20.0, "env": {"K": "V"}}
    assert exec_rec.exit_code == 0 and exec_rec.stdout_bytes == 6
    assert exec_rec.stdout_sha256 == hashlib.sha256(b"hello\n").hexdigest()
    assert records[1].content_sha256 == records[2].content_sha256 == hashlib.sha256(b"data").hexdigest()
    assert records[3].ok is False and "missing.txt" in records[3].error
    assert {r.sandbox_id for r in records} == {sb.id} and {r.backend for r in records} == {sb.backend}


def test_log_cannot_be_reached_from_inside(sb):
    log = sb.action_log
    r = sb.exec(f"ls {log.parent}; echo forged >> {log}; find / -name {log.name} 2>/dev/null")
    assert r.stdout == "" and "No such file or directory" in r.stderr
    records = read_action_log(log)  # every line still a valid record: nothing appended from inside
    assert len(records) == 1 and records[0].stdout_bytes == 0


def test_log_inside_the_workspace_is_refused(workspace: Path, sandbox_backend: str):
    with pytest.raises(SandboxError, match="which the sandbox can see"):
        open_sandbox(workspace, sandbox_backend, action_log=workspace / "log.jsonl")


def test_sandboxes_sharing_a_log_keep_one_sequence(workspace: Path, sandbox_backend: str, tmp_path: Path):
    log = tmp_path / "shared.jsonl"
    with (
        open_sandbox(workspace, sandbox_backend, action_log=log) as a,
        open_sandbox(workspace, sandbox_backend, action_log=log) as b,
    ):
        a.exec("true"), b.exec("true"), a.exec("true")
    records = read_action_log(log)
    assert [r.seq for r in records] == [0, 1, 2]
    assert records[0].sandbox_id == records[2].sandbox_id != records[1].sandbox_id
