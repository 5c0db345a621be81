"""Hostile code stays inside: limits, no network, read-only system, private files,
and sandboxes that cannot see each other."""

from __future__ import annotations

import socket
import sys
import subprocess
import threading
import time
import uuid
from pathlib import Path


from tests.sandbox.hostprocs import host_processes
from touchstone.sandbox import Limits, open_sandbox


def test_timeout_kills_the_whole_process_tree(sb):
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6}"  # a unique sleep duration
    script = f"sleep {marker} & (setsid sleep {marker} &) ; bash -c 'sleep {marker} & wait' & sleep {marker}"
    started = time.monotonic()
    r = sb.exec(script, timeout=1.5)
    assert r.timed_out and r.exit_code == 137 and r.signal == 9
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    assert host_processes(f"sleep {marker}") == []


def test_background_processes_do_not_outlive_their_exec(sb):
    marker = f"{uuid.uuid4().int % 10**6}.5"
    r = sb.exec(f"nohup sleep {marker} >/dev/null 2>&1 & echo started")
    assert r.stdout == "started\n" and r.wall_s < 5
    time.sleep(0.3)
    assert host_processes(f"sleep {marker}") == []


def test_fork_bomb_is_contained_and_host_stays_responsive(sb):
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 3"
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(r=sb.exec(bomb, timeout=4)))
    thread.start()
    time.sleep(1)
    probe = time.monotonic()
    subprocess.run(["true"], check=True)  # the host can still start processes
    assert time.monotonic() - probe < 2
    thread.join(30)
    assert not thread.is_alive()
    assert "fork" in result["r"].stderr and "Resource temporarily unavailable" in result["r"].stderr
    assert sb.exec("echo alive").stdout == "alive\n"  # and the sandbox is usable afterwards


def test_memory_hog_is_stopped_and_reported(sb):
    hog = "import time; chunks = []\nwhile True: chunks.append(bytearray(16 << 20)); time.sleep(0.01)"
    r = sb.exec(["python3", "-c", hog], timeout=20)
    assert r.oom_killed and r.exit_code == 137 and not r.timed_out, r


def test_no_network(sb):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        probe = (
            f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\n"
            "except OSError as e: print('refused', e)\n"
            "try:\n socket.getaddrinfo('deb.debian.org', 80); print('resolved')\n"
            "except OSError as e: print('no dns', e)\n"
        )
        r = sb.exec(["python3", "-c", probe])
        assert "connected" not in r.stdout and "refused" in r.stdout
        assert "resolved" not in r.stdout and "no dns" in r.stdout
    finally:
        server.close()


def test_system_directories_are_read_only(sb):
    r = sb.exec(
        "for d in /etc /usr /usr/lib/python3 /bin /; do touch $d/evil 2>/dev/null && echo wrote $d; done; "
        "pip install --user nothing >/dev/null 2>&1; echo done"
    )
    assert r.stdout == "done\n"


def test_host_files_are_invisible(sb, tmp_path: Path):
    secret = Path.home() / f".touchstone-secret-{uuid.uuid4().hex}"
    secret.write_text("host secret")
    try:
        r = sb.exec(f"cat {secret} {tmp_path}/actions.jsonl /root/.bash_history 2>&1; ls /home")
        assert "host secret" not in r.stdout and r.stdout.strip().endswith("agent")
    finally:
        secret.unlink()


def test_concurrent_sandboxes_are_isolated(workspace: Path, sandbox_backend: str):
    limits = Limits(timeout_s=20)
    with (
        open_sandbox(workspace, sandbox_backend, limits=limits) as a,
        open_sandbox(workspace, sandbox_backend, limits=limits) as b,
    ):
        results: dict = {}
        threads = [
            threading.Thread(target=lambda: results.update(a=a.exec("echo A > mine.txt; sleep 1; ls; cat mine.txt"))),
            threading.Thread(target=lambda: results.update(b=b.exec("echo B > mine.txt; sleep 1; ls; cat mine.txt"))),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["a"].stdout.endswith("A\n") and results["b"].stdout.endswith("B\n")
        # Neither can see the other's processes or files.
        r = a.exec("ps -e -o args | grep -c 'sleep' ; find / -name mine.txt -not -path '/proc/*' 2>/dev/null")
        assert r.stdout.split()[1:] == ["/workspace/mine.txt"]
        assert a.read_file("mine.txt") == b"A\n" and b.read_file("mine.txt") == b"B\n"


def test_workspace_size_is_limited(workspace: Path, sandbox_backend: str):
    with open_sandbox(workspace, sandbox_backend, limits=Limits(workspace_bytes="4m")) as box:
        r = box.exec("head -c 8000000 /dev/zero > big; echo rc=$?")
        assert "rc=0" not in r.stdout
        assert "No space left on device" in r.stderr or "File too large" in r.stderr
        assert len(box.read_file("big")) <= 4 << 20


def test_mounts_are_visible_read_only(workspace: Path, sandbox_backend: str, tmp_path: Path):
    from touchstone.sandbox import Mount

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden.py").write_text("def test_x():\n    assert True\n")
    mounts = [Mount(host=hidden, target="/mnt/hidden")]
    with open_sandbox(workspace, sandbox_backend, mounts=mounts) as box:
        r = box.exec("cat /mnt/hidden/test_hidden.py; echo x > /mnt/hidden/evil; echo rc=$?")
        assert "def test_x" in r.stdout and "rc=1" in r.stdout
        assert box.exec("python -m pytest -q /mnt/hidden -p no:cacheprovider").exit_code == 0
    assert sorted(p.name for p in hidden.iterdir()) == ["test_hidden.py"]


def test_mount_nested_in_a_workspace_directory(sandbox_backend: str, tmp_path: Path):
    """A read-only mount below a directory the workspace has (`pkg/tests`, as
    the verifier mounts a package's tests): Docker makes the mount point when
    the container starts, before the workspace is copied in, and the copy
    must not trip over it."""
    from touchstone.sandbox import Mount

    ws, tests = tmp_path / "ws", tmp_path / "tests"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "core.py").write_text("X = 1\n")
    tests.mkdir()
    (tests / "test_core.py").write_text("def test_x():\n    assert True\n")
    with open_sandbox(ws, sandbox_backend, mounts=[Mount(host=tests, target="/workspace/pkg/tests")]) as box:
        r = box.exec(
            "cat pkg/core.py pkg/tests/test_core.py; echo y > pkg/new.py; echo rc=$?; "
            "echo x > pkg/tests/evil; echo rc=$?"
        )
        assert "X = 1" in r.stdout and "def test_x" in r.stdout
        assert r.stdout.count("rc=0") == 1 and "rc=1" in r.stdout  # the package is writable, the mount is not
    assert sorted(p.name for p in tests.iterdir()) == ["test_core.py"]


def test_sandbox_outlives_the_thread_that_opened_it(workspace: Path, sandbox_backend: str):
    opened: list = []
    thread = threading.Thread(target=lambda: opened.append(open_sandbox(workspace, sandbox_backend)))
    thread.start()
    thread.join()
    with opened[0] as box:
        assert box.exec("echo still here").stdout == "still here\n"


def test_killed_harness_takes_its_bwrap_sandbox_along(workspace: Path):
    marker = f"{uuid.uuid4().int % 10**6}.25"
    script = (
        "import sys\nfrom touchstone.sandbox import open_sandbox\n"
        f"sb = open_sandbox({str(workspace)!r}, 'bwrap')\nprint('open', flush=True)\n"
        f"sb.exec('sleep {marker} & (setsid sleep {marker} &); sleep {marker}')\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout.readline() == "open\n"
        deadline = time.monotonic() + 20
        while len(host_processes(f"sleep {marker}")) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(host_processes(f"sleep {marker}")) == 3
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + 10
    while host_processes(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes(f"sleep {marker}") == []
