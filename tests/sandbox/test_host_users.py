"""Issue 34 #6, on both backends: every sandbox runs as a host uid of its own, so
a budget the kernel counts per user cannot be used up by one sandbox for
another running at the same time (all sandboxes of a backend used to share
one uid: one filled the POSIX message queue budget and mq_open failed in another)."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

import pytest

from touchstone.sandbox import HostUser, Limits, Mount, open_sandbox
from touchstone.sandbox.hostids import LOCK_DIR
from touchstone.sandbox.workspace import bounded_dir

# Opens message queues (ctypes, no extra package) until the kernel refuses one,
# and holds them; "probe" opens a single one. Prints what happened as JSON.
_MQUEUES = r"""
import ctypes, json, os, sys, time
rt = ctypes.CDLL("librt.so.1", use_errno=True)
mode, sync = sys.argv[1], sys.argv[2]
def wait_for(name):
    for _ in range(6000):
        if os.path.exists(f"{sync}/{name}"):
            return
        time.sleep(0.01)
    sys.exit(f"no {name} from the other sandbox")
opened, err = 0, 0
if mode == "fill":
    while opened < 10_000:
        if rt.mq_open(f"/fill{opened}".encode(), 0o100 | 0o2, 0o600, None) < 0:  # O_CREAT|O_RDWR
            err = ctypes.get_errno()
            break
        opened += 1
    open(f"{sync}/full", "w").close()
    wait_for("probed")  # hold the queues while the other sandbox tries
else:
    wait_for("full")
    opened = int(rt.mq_open(b"/probe", 0o100 | 0o2, 0o600, None) >= 0)
    err = 0 if opened else ctypes.get_errno()
    open(f"{sync}/probed", "w").close()
print(json.dumps({"opened": opened, "errno": err}))
"""


def test_a_per_user_budget_used_up_in_one_sandbox_leaves_another_unharmed(
    workspace: Path, sandbox_backend: str, tmp_path: Path
):
    if os.geteuid() != 0:
        pytest.skip("without root every sandbox runs as the harness's user")
    limits = Limits(timeout_s=60, memory_bytes="256m")
    with bounded_dir(tmp_path / "sync", 1 << 20, 16, mode=0o777) as sync:
        mounts = [Mount(host=sync, target="/mnt/sync", read_only=False)]
        with (
            open_sandbox(workspace, sandbox_backend, limits=limits, mounts=mounts) as filler,
            open_sandbox(workspace, sandbox_backend, limits=limits, mounts=mounts) as other,
        ):
            assert filler.host_user.uid != other.host_user.uid
            results = {}
            run = threading.Thread(
                target=lambda: results.update(fill=filler.exec(["python3", "-c", _MQUEUES, "fill", "/mnt/sync"]))
            )
            run.start()
            probe = other.exec(["python3", "-c", _MQUEUES, "probe", "/mnt/sync"])
            run.join()
    fill = json.loads(results["fill"].stdout)
    assert fill["errno"] == 24 and 0 < fill["opened"] < 100, results["fill"]  # EMFILE: the user's budget is used up
    assert json.loads(probe.stdout) == {"opened": 1, "errno": 0}, probe


def test_sandboxes_can_share_a_host_user_and_it_is_given_back(workspace: Path, sandbox_backend: str):
    if os.geteuid() != 0:
        pytest.skip("without root every sandbox runs as the harness's user")
    with HostUser.acquire() as shared:
        with open_sandbox(workspace, sandbox_backend, host_user=shared) as a:
            with open_sandbox(workspace, sandbox_backend, host_user=shared) as b:
                assert a.host_user is b.host_user is shared
                assert a.exec("id -un").stdout == "agent\n"
        held = os.open(LOCK_DIR / str(shared.uid), os.O_RDWR)
        try:  # still ours after the sandboxes closed: the caller gives it back
            with pytest.raises(BlockingIOError):
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(held)


@pytest.mark.docker
def test_a_docker_host_without_the_root_filesystem_names_the_user_from_the_image(tmp_path: Path, monkeypatch):
    """A step container of the Docker deployment has the sandbox image (through the
    socket) but no root filesystem and no debootstrap: the accounts come from the image."""
    from touchstone.sandbox.docker import ensure_image, image_accounts
    from touchstone.sandbox.image import ensure_rootfs

    ensure_image(progress=False)
    rootfs_etc = ensure_rootfs(progress=False) / "etc"
    monkeypatch.setenv("TOUCHSTONE_CACHE", str(tmp_path))
    copied = image_accounts()
    assert copied.is_relative_to(tmp_path)
    for name in ("passwd", "group"):
        assert (copied / name).read_text() == (rootfs_etc / name).read_text()
    assert image_accounts() == copied  # copied once
