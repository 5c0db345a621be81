"""The host-side workspace: copy-in, read/write, snapshots, diffs, export, and
symlinks that must never lead the harness out of the workspace."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from touchstone.sandbox import SandboxError, open_sandbox


def test_read_write_roundtrip(sb):
    sb.write_file("pkg/new/mod.py", "X = 1\n")
    assert sb.exec("cat pkg/new/mod.py").stdout == "X = 1\n"
    sb.exec("printf 'bin\\x00\\xff' > data.bin")
    assert sb.read_file("data.bin") == b"bin\x00\xff"
    assert sb.read_file("/workspace/notes.txt") == b"first line\n"


def test_diff_reports_created_modified_deleted(sb, workspace: Path):
    sb.exec("echo second >> notes.txt && rm pkg/calc.py && echo 'y = 2' > pkg/extra.py && printf '\\xff' > blob.bin")
    d = sb.diff()
    assert (d.created, d.modified, d.deleted) == (["blob.bin", "pkg/extra.py"], ["notes.txt"], ["pkg/calc.py"])
    assert d.binary == ["blob.bin"]
    assert "+second" in d.patch and "-def add(a, b):" in d.patch and "+y = 2" in d.patch
    # The patch applies to a pristine copy and reproduces the text changes.
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run(["git", "apply", "-"], input=d.patch.encode(), cwd=workspace, check=True)
    assert (workspace / "notes.txt").read_text() == "first line\nsecond\n"
    assert not (workspace / "pkg" / "calc.py").exists()


def test_diff_since_a_snapshot(sb):
    sb.exec("echo a > a.txt")
    mark = sb.snapshot()
    sb.exec("echo b > b.txt; echo a2 >> a.txt")
    d = sb.diff(since=mark)
    assert (d.created, d.modified, d.deleted) == (["b.txt"], ["a.txt"], [])
    assert sb.diff().created == ["a.txt", "b.txt"]


def test_export_copies_the_workspace(sb, tmp_path: Path):
    sb.exec("echo done > result.txt")
    out = sb.export(tmp_path / "out")
    assert (out / "result.txt").read_text() == "done\n" and (out / "pkg" / "calc.py").is_file()
    with pytest.raises(SandboxError, match="not an empty directory"):
        sb.export(tmp_path / "out")


def test_symlink_out_of_workspace_refused_at_copy_in(workspace: Path, sandbox_backend: str):
    os.symlink("/etc/passwd", workspace / "passwd")
    with pytest.raises(SandboxError, match="points outside the workspace"):
        open_sandbox(workspace, sandbox_backend)
    (workspace / "passwd").unlink()
    # Relative links that climb out, also through an inner link, are refused too.
    os.symlink(".", workspace / "here")
    os.symlink("here/../secret", workspace / "sneaky")
    with pytest.raises(SandboxError, match="sneaky"):
        open_sandbox(workspace, sandbox_backend)


def test_symlinks_inside_workspace_are_kept(workspace: Path, sandbox_backend: str):
    os.symlink("pkg/calc.py", workspace / "calc_link.py")
    with open_sandbox(workspace, sandbox_backend) as box:
        assert box.exec("cat calc_link.py").stdout.startswith("def add")


def test_symlink_made_inside_refused_at_export_and_never_followed(sb, tmp_path: Path):
    sb.exec("ln -s /etc/passwd passwd; ln -s /etc etcdir")
    with pytest.raises(SandboxError, match="not a regular file|cannot read"):
        sb.read_file("passwd")
    with pytest.raises(SandboxError, match="not a directory inside the workspace"):
        sb.read_file("etcdir/passwd")
    with pytest.raises(SandboxError, match="not a directory inside the workspace"):
        sb.write_file("etcdir/evil", "x")
    assert not Path("/etc/evil").exists()
    sb.write_file("passwd", "replaced")  # replaces the link, never writes through it
    assert sb.exec("cat passwd").stdout == "replaced"
    assert "passwd" in sb.snapshot() and "etcdir" in sb.snapshot()
    with pytest.raises(SandboxError, match="points outside the workspace"):
        sb.export(tmp_path / "out")


def test_fifo_made_inside_does_not_hang_the_harness(sb):
    sb.exec("mkfifo pipe")
    with pytest.raises(SandboxError, match="not a regular file"):
        sb.read_file("pipe")
    assert sb.snapshot()["pipe"].startswith("special:")


def test_paths_outside_the_workspace_are_refused(sb):
    for bad in ("/etc/passwd", "../x", "a/../../x", ""):
        with pytest.raises(SandboxError, match="not a path inside the workspace"):
            sb.read_file(bad)


def test_workspace_is_a_private_copy(sb, workspace: Path):
    sb.exec("echo changed > notes.txt")
    assert (workspace / "notes.txt").read_text() == "first line\n"


def test_harness_writes_respect_the_workspace_limit(workspace: Path, sandbox_backend: str):
    from touchstone.sandbox import Limits, read_action_log

    with open_sandbox(workspace, sandbox_backend, limits=Limits(workspace_bytes="1m")) as box:
        box.write_file("notes.txt", "kept\n")
        with pytest.raises(SandboxError, match="notes.txt"):
            box.write_file("notes.txt", b"x" * (2 << 20))
        assert read_action_log(box.action_log)[-1].ok is False
        assert box.read_file("notes.txt") == b"kept\n"  # the failed write changed nothing
        assert box.diff().created == []
