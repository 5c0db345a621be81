"""What an attacker inside a sandbox looks for beyond its own files: the
harness's secrets and paths, a process that survives its exec, and a way to
take over the sandbox's PID 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.sandbox.hostprocs import host_processes
from touchstone.sandbox import Limits, open_sandbox

_HARNESS = """
import json, os, sys
from touchstone.sandbox import Mount, open_sandbox
mounts = [Mount(host=sys.argv[4], target="/mnt/hidden")] if sys.argv[2] == "bwrap" else []
with open_sandbox(sys.argv[1], sys.argv[2], mounts=mounts) as sb:
    r = sb.exec(sys.argv[3])
    print(json.dumps({"stdout": r.stdout, "stderr": r.stderr, "host_dir": str(sb._dir)}))
"""
# Everything a process inside can read about the processes and mounts around it.
_LOOK_AROUND = (
    "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/self/mountinfo /proc/1/mountinfo; "
    "do echo \"== $f\"; tr '\\0' '\\n' < $f 2>&1; done; env; ps -eo args"
)


def test_harness_environment_and_paths_are_invisible_inside(workspace: Path, sandbox_backend: str, tmp_path: Path):
    """A fresh harness process with secrets in its environment (so its bwrap
    launchers start with them), looking around from inside. bwrap run by root also
    hides where its read-only mounts come from (Docker shows a mount's host path)."""
    from touchstone import paths

    hidden = tmp_path / "hidden-tests"
    hidden.mkdir()
    canaries = {
        "OPENAI_API_KEY": f"sk-canary-{uuid.uuid4().hex}",
        "AWS_SECRET_ACCESS_KEY": f"aws-canary-{uuid.uuid4().hex}",
        "TOUCHSTONE_CANARY_PATH": str(tmp_path / "harness-only"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(workspace), sandbox_backend, _LOOK_AROUND, str(hidden)],
        capture_output=True,
        text=True,
        env={**os.environ, **canaries},
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    inside = seen["stdout"] + seen["stderr"]
    assert "== /proc/1/environ" in inside and "/proc/self/mountinfo" in inside and "/workspace" in inside
    for secret in [*canaries, *canaries.values()]:
        assert secret not in inside
    host_paths = [str(workspace), seen["host_dir"], os.getcwd()]
    if os.geteuid() == 0:  # the workspace copy is a tmpfs and bwrap's sources are staged
        host_paths += [str(tmp_path), str(paths.cache())]
    for host_path in host_paths:
        assert host_path not in inside, host_path


def test_no_process_survives_its_exec_even_when_it_kills_the_wrapper(sb):
    marker = f"{uuid.uuid4().int % 10**6}.75"
    for escape in (
        f"(setsid nohup sleep {marker} >/dev/null 2>&1 &); echo left",
        f"(setsid nohup sleep {marker} >/dev/null 2>&1 &); kill -9 $PPID; echo killed",
        f"nohup sleep {marker} >/dev/null 2>&1 & disown; kill -9 0",
    ):
        sb.exec(escape)
        assert host_processes(f"sleep {marker}") == []  # at once: exec returns only when none is left
        assert sb.exec("echo next").stdout == "next\n"


_TAKEOVER = """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
for name, request in (("attach", PTRACE_ATTACH), ("seize", PTRACE_SEIZE)):
    ctypes.set_errno(0)
    print(name, libc.ptrace(request, 1, 0, 0), ctypes.get_errno())
try:
    print("mem", len(open("/proc/1/mem", "rb").read(1)))
except OSError as exc:
    print("mem", exc.errno)
uid = os.stat("/proc/1").st_uid
print("pid1 is mine", uid == os.getuid())
if uid != os.getuid():
    try:
        os.kill(1, signal.SIGKILL)
        print("killed pid1")
    except PermissionError:
        print("kill refused")
"""


def test_pid1_cannot_be_taken_over(sb):
    r = sb.exec(["python3", "-c", _TAKEOVER])
    lines = r.stdout.splitlines()
    assert lines[0] == "attach -1 1" and lines[1] == "seize -1 1", r.stdout  # EPERM
    if sb.backend == "docker":  # PID 1 outlives every exec: it must not be the agent's
        assert lines[2] in ("mem 1", "mem 13"), r.stdout  # EPERM or EACCES: no way into its memory
        assert lines[3:] == ["pid1 is mine False", "kill refused"]
    else:  # bwrap's PID 1 is the exec's own init, and dies with it (see the next tests)
        assert lines[3] == "pid1 is mine True"
    assert sb.exec("echo still").stdout == "still\n"


def test_pid1_ignores_kill_from_inside(sb):
    r = sb.exec("kill -9 1; kill -9 -1; sleep 0.2; echo survived")  # docker: refused; bwrap: init ignores it
    assert r.stdout == "survived\n" or (r.exit_code == 137 and sb.backend == "bwrap")
    assert sb.exec("echo fine").stdout == "fine\n"


def test_a_command_cannot_slip_a_process_past_the_next_exec(workspace: Path, sandbox_backend: str):
    """A process that forks continuously, to dodge the kill between execs."""
    marker = f"{uuid.uuid4().int % 10**6}.125"
    dodge = f"(setsid bash -c 'while :; do sleep {marker} & sleep 0.01; done' &) ; echo go"
    with open_sandbox(workspace, sandbox_backend, limits=Limits(timeout_s=10, processes=64)) as box:
        assert box.exec(dodge).stdout == "go\n"
        assert host_processes(f"sleep {marker}") == []
        time.sleep(0.2)
        assert host_processes(f"sleep {marker}") == []
