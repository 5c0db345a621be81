"""Resource findings of the escape review, on both backends: scratch space that
could fill memory, the OOM killer's choice of victim, CPU accounting, the host
user a sandbox runs as, and what the sandbox's own network and home look like."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from touchstone.sandbox import Limits, open_sandbox

_HOG = "import time; chunks = []\nwhile True: chunks.append(bytearray(8 << 20)); time.sleep(0.005)"


@pytest.fixture
def small(workspace: Path, sandbox_backend: str):
    limits = Limits(timeout_s=30, memory_bytes="128m", tmp_bytes="512m")
    with open_sandbox(workspace, sandbox_backend, limits=limits) as box:
        yield box


def test_scratch_filesystems_are_capped_below_the_memory_limit(small):
    r = small.exec(
        "for d in /dev/shm /tmp ~; do head -c 300M /dev/zero > $d/fill; echo rc=$?; done; "
        "df -k --output=size /dev/shm /tmp ~ | tail -3"
    )
    lines = r.stdout.split()
    assert lines[:3] == ["rc=1", "rc=1", "rc=1"] and "No space left on device" in r.stderr, r
    assert [int(kb) for kb in lines[3:]] == [32 * 1024] * 3  # a quarter of 128 MiB each
    assert not r.oom_killed and small.exec("echo next").stdout == "next\n"


def test_oom_with_full_scratch_space_is_reported_and_the_sandbox_survives(small):
    r = small.exec(
        f"for d in /dev/shm /tmp ~; do head -c 300M /dev/zero > $d/fill; done 2>/dev/null; python3 -c '{_HOG}'"
    )
    assert r.oom_killed and r.exit_code == 137, r
    for _ in range(3):  # the harness's side of the sandbox is intact
        assert small.exec("echo alive; find /dev/shm /tmp ~ -mindepth 1 | wc -l").stdout == "alive\n0\n"


def test_cpu_time_of_a_cpu_bound_command_is_measured(sb):
    busy = sb.exec(["python3", "-c", "import time\nwhile time.process_time() < 0.6: pass"], timeout=120)
    assert 0.5 <= busy.cpu_s <= 2.0, busy.cpu_s
    # Children that their shell never waits for (bwrap's rusage missed these).
    spin = "import time\nwhile time.process_time() < 0.4: pass\nopen('/tmp/done' + str(time.time()), 'w')"
    children = sb.exec(
        f'for i in 1 2; do (setsid python3 -c "{spin}" &); done; until [ $(ls /tmp | wc -l) = 2 ]; do sleep 0.2; done',
        timeout=120,
    )
    assert children.exit_code == 0 and 0.6 <= children.cpu_s <= 4.0, children
    idle = sb.exec("sleep 0.5")
    assert idle.cpu_s < 0.3, idle.cpu_s


def test_sandbox_processes_run_as_an_unprivileged_host_user(sb):
    marker = f"2.{uuid.uuid4().int % 10**6}"
    runner = threading.Thread(target=lambda: sb.exec(f"sleep {marker}", timeout=20))
    runner.start()
    try:
        deadline, uids = time.monotonic() + 10, []
        while not uids and time.monotonic() < deadline:
            out = subprocess.run(["ps", "-eo", "uid=,args="], capture_output=True, text=True).stdout
            uids = [int(line.split()[0]) for line in out.splitlines() if line.split()[1:] == ["sleep", marker]]
            time.sleep(0.05)
    finally:
        sb.exec("true")  # waits for the sleep's exec: the lock
        runner.join()
    assert uids and all(uid not in (0, os.getuid()) or os.getuid() != 0 for uid in uids), uids
    if os.getuid() == 0:
        assert uids == [sb.host_user.uid]  # its own (tests/sandbox/test_host_users.py)


def test_loopback_is_up_and_scratch_directories_are_as_documented(sb):
    probe = (
        "import socket\nserver = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n"
        "socket.create_connection(server.getsockname(), timeout=2).sendall(b'hi')\n"
        "print(server.accept()[0].recv(2).decode())"
    )
    assert sb.exec(["python3", "-c", probe]).stdout == "hi\n"
    assert sb.exec("stat -c %a ~ /dev/shm /tmp; stat -c %U ~").stdout.split() == ["755", "1777", "1777", "agent"]


_UNPRIVILEGED = """
import json, sys, warnings
from touchstone.sandbox import open_sandbox
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    box = open_sandbox(sys.argv[1], "bwrap")
with box:
    r = box.exec("id -u; head -c 300M /dev/zero > /dev/shm/fill; df -k --output=size /dev/shm | tail -1")
print(json.dumps({"warnings": [str(w.message) for w in caught], "stdout": r.stdout, "unenforced": box.unenforced}))
"""


def test_without_root_the_limits_that_do_not_hold_are_named(tmp_path: Path):
    """A harness run by an unprivileged user (here: root dropping to one, in a
    mount namespace where that user can reach the interpreter and root filesystem)."""
    import json
    import sys
    import tempfile

    from touchstone.sandbox.image import ensure_rootfs

    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    rootfs = ensure_rootfs(progress=False)
    top = Path(tempfile.mkdtemp(prefix="touchstone-unpriv-"))
    try:
        top.chmod(0o755)
        (top / "ws").mkdir()
        (top / "ws" / "a.txt").write_text("x\n")
        (top / "harness.py").write_text(_UNPRIVILEGED)
        (top / "cache" / rootfs.name).mkdir(parents=True)
        prefix = Path(sys.base_prefix)
        setup = (
            f"mount --bind {rootfs} {top}/cache/{rootfs.name} && mkdir {top}/py && mount --bind {prefix} {top}/py && "
            f"mount -t tmpfs -o mode=0755 none {Path.home()} && mkdir -p {prefix} && mount --bind {top}/py {prefix} && "
            f"exec setpriv --reuid=900001 --regid=900001 --clear-groups env -i PATH=/usr/bin:/bin HOME={top} "
            f"TOUCHSTONE_CACHE={top}/cache {sys.executable} {top}/harness.py {top}/ws"
        )
        done = subprocess.run(["unshare", "-m", "sh", "-c", setup], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.splitlines()[-1])
    finally:
        subprocess.run(["rm", "-rf", str(top)])
    assert seen["stdout"].split() == ["1000", str(64 * 1024)]  # it runs, and /dev/shm is still bounded
    said = " ".join(seen["warnings"])
    for limit in ("workspace_bytes", "memory_bytes", "processes", "cpus"):
        assert limit in said and any(line.startswith(limit) for line in seen["unenforced"])
