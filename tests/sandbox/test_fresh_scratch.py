"""Issue 34 #5, on both backends: /tmp, home, /dev/shm and IPC objects are new
for every exec, whatever the previous command did to stop a cleanup. Docker's
used to be emptied by a wrapper running as the sandbox user: a command that
killed the wrapper, or left a folder it could no longer read, passed files on
to the next exec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Leaves something everywhere an exec can write outside the workspace: plain and
# hidden files, folders nobody may read, a System V queue and shared memory
# segment, a POSIX message queue; then kills its parent (Docker's wrapper).
_LEAVE_STATE = r"""
for d in /tmp ~ /dev/shm; do mkdir $d/locked && touch $d/locked/x $d/.hidden $d/plain && chmod 0 $d/locked; done
ipcmk -Q >/dev/null && ipcmk -M 4096 >/dev/null
python3 -c '
import ctypes
rt = ctypes.CDLL("librt.so.1", use_errno=True)
assert rt.mq_open(b"/left", 0o100 | 0o1, 0o600, None) >= 0, ctypes.get_errno()  # O_CREAT|O_WRONLY
'
ls -A /tmp ~ /dev/shm | grep -c .; ipcs -q -m | grep -c 0x
kill -9 $PPID
"""
_SEE_STATE = (
    "ls -A /tmp ~ /dev/shm; ls -A /dev/mqueue 2>/dev/null; ipcs -q -m -s | grep -c 0x; stat -c %a /tmp ~ /dev/shm"
)


def test_scratch_is_new_for_every_exec_even_after_a_killed_wrapper(sb):
    left = sb.exec(_LEAVE_STATE)
    assert left.stdout.split()[:2] == ["12", "2"], left  # 3 entries per folder (+3 headers), 2 IPC objects
    seen = sb.exec(_SEE_STATE)
    assert seen.exit_code == 0, seen
    assert seen.stdout.split() == ["/dev/shm:", "/home/agent:", "/tmp:", "0", "1777", "755", "1777"], seen


def test_docker_scratch_is_recreated_from_outside(workspace, require_docker):
    """Not emptied: a new filesystem each time (its root's birth time changes:
    the device number of the one before is free again), made by a process of
    the harness that nothing inside can see or stop."""
    from touchstone.sandbox import open_sandbox

    if os.geteuid() != 0:
        pytest.skip("needs root (without it, the fallback is named in `unenforced`)")
    with open_sandbox(workspace, "docker") as sb:
        assert sb.unenforced == []
        born = [sb.exec("stat -c %.9W /tmp ~ /dev/shm").stdout for _ in range(3)]
        assert len(set(born)) == 3, born
        assert "scratch.py" not in sb.exec("ps -eo args").stdout


_WITHOUT_SYS_ADMIN = r"""
import json, sys, tempfile, warnings
from pathlib import Path
from touchstone.sandbox import Mount, open_sandbox
plain = Path(tempfile.mkdtemp())
plain.chmod(0o777)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    box = open_sandbox(sys.argv[1], "docker", mounts=[Mount(host=plain, target="/mnt/out", read_only=False)])
with box:
    box.exec("touch /tmp/left ~/left /dev/shm/left")
    seen = box.exec("ls -A /tmp ~ /dev/shm | grep -c left").stdout
print(json.dumps({"unenforced": box.unenforced, "left": seen}))
"""


def test_a_root_harness_without_cap_sys_admin_falls_back_and_says_so(workspace, require_docker):
    """As in a deployment's step container (root, no CAP_SYS_ADMIN): nothing can
    be mounted, so the workspace, the writable mount and the scratch space are
    bounded or recreated as well as the harness can, and each gap is named."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    done = subprocess.run(
        [
            "setpriv",
            "--bounding-set=-sys_admin",
            "--inh-caps=-sys_admin",
            sys.executable,
            "-c",
            _WITHOUT_SYS_ADMIN,
            str(workspace),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["left"] == "0\n"  # the sandbox user's own cleanup, in the ordinary case
    named = " ".join(seen["unenforced"])
    assert "workspace_bytes" in named and "writable mount /mnt/out" in named and "fresh scratch" in named, named
