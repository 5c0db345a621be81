"""Issue 34 #3 and #7, on both backends: every path a sandbox can write to is a
filesystem with a size and an inode bound. A writable mount used to be a plain
bind of a host folder (300 MiB reached the host's disk past a 64 MiB workspace
limit), and bwrap's /dev and /mnt were tmpfs the sandbox user owned, with no size."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from touchstone.sandbox import Limits, Mount, SandboxError, open_sandbox
from touchstone.sandbox.workspace import bounded_dir

# Every mount point the sandboxed code can create a file in, with its filesystem's
# type, size and inode count (statvfs: a tmpfs without a size says 0 blocks).
_WRITABLE_MOUNTS = r"""
import json, os, tempfile
found = {}
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    point = fields[4].encode().decode("unicode_escape")
    if not os.path.isdir(point) or point.startswith(("/proc", "/sys", "/dev/pts")):
        continue
    try:
        fd, name = tempfile.mkstemp(dir=point)
    except OSError:
        continue
    os.close(fd)
    os.unlink(name)
    fs = os.statvfs(point)
    found[point] = [fields[fields.index("-") + 1], fs.f_blocks * fs.f_frsize, fs.f_files]
print(json.dumps(found))
"""
_LIMITS = Limits(timeout_s=30, memory_bytes="256m", workspace_bytes="16m", workspace_files=1000, tmp_bytes="8m")


@pytest.fixture
def out_dir(tmp_path: Path):
    with bounded_dir(tmp_path / "out", 1 << 20, 32, mode=0o777) as out:
        yield out


def test_every_writable_path_is_a_bounded_filesystem(workspace: Path, out_dir: Path, sandbox_backend: str):
    if os.geteuid() != 0:
        pytest.skip("bounded host directories need root (without it they are named as unenforced)")
    mounts = [Mount(host=out_dir, target="/mnt/out", read_only=False)]
    with open_sandbox(workspace, sandbox_backend, limits=_LIMITS, mounts=mounts) as sb:
        r = sb.exec(["python3", "-c", _WRITABLE_MOUNTS])
    assert r.exit_code == 0, r.stderr
    found = json.loads(r.stdout)
    scratch = ["/tmp", "/home/agent", "/dev/shm"]
    # Docker's /dev/mqueue holds message queues, bounded per user by RLIMIT_MSGQUEUE, not blocks
    assert sorted(set(found) - {"/dev/mqueue"}) == sorted(["/workspace", "/mnt/out", *scratch]), found
    sizes = {point: size for point, (_, size, _) in found.items()}
    assert [sizes[p] for p in scratch] == [8 << 20] * 3
    assert sizes["/workspace"] == 16 << 20 and sizes["/mnt/out"] == 1 << 20
    assert found["/workspace"][2] == 1001 and found["/mnt/out"][2] == 33  # inodes (+1: the root)


def test_writing_past_a_writable_mounts_bound_fails_inside(workspace: Path, out_dir: Path, sandbox_backend: str):
    if os.geteuid() != 0:
        pytest.skip("bounded host directories need root")
    disk_before = shutil.disk_usage(out_dir.parent).used
    mounts = [Mount(host=out_dir, target="/mnt/out", read_only=False)]
    with open_sandbox(workspace, sandbox_backend, limits=_LIMITS, mounts=mounts) as sb:
        r = sb.exec("head -c 8M /dev/zero > /mnt/out/big; echo rc=$?; for i in $(seq 64); do : > /mnt/out/f$i; done")
        assert r.stdout == "rc=1\n" and "No space left on device" in r.stderr, r
        assert os.path.getsize(out_dir / "big") <= 1 << 20
        assert len(list(out_dir.iterdir())) == 32  # "big" and 31 of the 64
    assert shutil.disk_usage(out_dir.parent).used - disk_before < 1 << 20  # none of it on the host's disk


def test_a_plain_host_folder_is_refused_as_a_writable_mount(workspace: Path, tmp_path: Path, sandbox_backend: str):
    if os.geteuid() != 0:
        pytest.skip("without root a plain folder is accepted and named as unenforced")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SandboxError, match="writable mount .*bounded_dir"):
        open_sandbox(workspace, sandbox_backend, mounts=[Mount(host=plain, target="/mnt/out", read_only=False)])
    # read-only, the same folder is fine
    with open_sandbox(workspace, sandbox_backend, mounts=[Mount(host=plain, target="/mnt/out")]) as sb:
        assert sb.exec("ls /mnt/out && echo ok").stdout == "ok\n"


def test_bwraps_dev_and_mnt_are_read_only(workspace: Path, out_dir: Path):
    """bwrap's /dev (and /mnt, made for mount points) were tmpfs owned by the
    sandbox user with no size: 180 MiB fitted against a 16 MiB scratch cap."""
    mounts = [Mount(host=out_dir, target="/mnt/out", read_only=False)]
    with open_sandbox(workspace, "bwrap", limits=_LIMITS, mounts=mounts) as sb:
        r = sb.exec("for f in /dev/fill /mnt/fill; do echo x > $f; done; echo hi > /dev/null && ls /dev/shm /dev/null")
    assert r.stderr.count("Read-only file system") == 2, r
    assert r.stdout == "/dev/null\n\n/dev/shm:\n", r


def test_scratch_inodes_are_bounded_by_the_memory_limit(workspace: Path, sandbox_backend: str):
    """bwrap cannot give /tmp an inode count (--size only); empty files cost
    kernel memory charged to the sandbox's memory cgroup, so creating them ends
    in the sandbox's OOM kill, not in the host's memory."""
    fill = "import os\nfor n in range(5_000_000):\n    os.close(os.open(f'/tmp/{n}', os.O_CREAT | os.O_WRONLY))"
    limits = Limits(timeout_s=120, memory_bytes="64m")
    with open_sandbox(workspace, sandbox_backend, limits=limits) as sb:
        if sb.unenforced and any(line.startswith("memory_bytes") for line in sb.unenforced):
            pytest.skip("no memory cgroup here: " + "; ".join(sb.unenforced))
        r = sb.exec(["python3", "-c", fill])
        assert r.oom_killed and r.exit_code == 137, r
        assert sb.exec("ls /tmp | wc -l").stdout == "0\n"  # and the next exec starts empty
