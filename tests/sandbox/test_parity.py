"""Issue 34 #9, the backend parity suite: the same probes on both backends must
give the same answers, but for the differences docs/formats/sandbox.md lists
as deliberate ("Backend parity"). The harness that opens the sandboxes runs
with an ignored signal, a blocked one, a raised nice value and umask 077, so that
nothing of its own state can pass into a command unnoticed (bwrap's commands
inherited the harness's ignored signals and nice value)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker  # both backends, always: Docker must be there (it is in CI)

# What a command sees of its process state, scratch space, network, user and limits.
_PROBE = r"""
import grp, json, os, pwd, resource, shutil, signal, socket, subprocess
def runs_from(folder):
    shutil.copy("/bin/true", f"{folder}/probe-true")
    try:
        return subprocess.run([f"{folder}/probe-true"]).returncode == 0
    except PermissionError:
        return False
def loopback(family, host):
    try:
        with socket.socket(family) as server:
            server.bind((host, 0)); server.listen()
            with socket.create_connection(server.getsockname()[:2], timeout=2):
                return True
    except OSError:
        return False
limits = {}
for line in open("/proc/self/limits").readlines()[1:]:
    name, soft, hard = line[:26].strip(), line[26:47].strip(), line[47:68].strip()
    limits[name] = [soft, hard]
me = pwd.getpwuid(os.getuid())
print(json.dumps({
    "nice": os.getpriority(os.PRIO_PROCESS, 0),
    "umask": oct(os.umask(0o022)),
    "exec from": {d: runs_from(d) for d in ("/tmp", os.environ["HOME"], "/dev/shm", "/workspace")},
    "loopback": {"127.0.0.1": loopback(socket.AF_INET, "127.0.0.1"), "::1": loopback(socket.AF_INET6, "::1")},
    "environment": dict(sorted((k, v) for k, v in os.environ.items() if k not in ("PWD", "SHLVL", "_"))),
    "user": [me.pw_name, me.pw_dir, me.pw_shell, grp.getgrgid(os.getgid()).gr_name, sorted(grp.getgrgid(g).gr_name for g in os.getgroups())],
    "uid": os.getuid(),
    "cwd": os.getcwd(),
    "hostname": socket.gethostname(),
    "scratch modes": {d: oct(os.stat(d).st_mode & 0o7777) for d in ("/tmp", os.environ["HOME"], "/dev/shm")},
    "limits": limits,
}, sort_keys=True))
"""
# Exit codes of the same commands.
_EXITS = {
    "exit 3": "exit 3",
    "killed by SIGKILL": "kill -9 $$",
    "missing program": "no-such-program",
    "kills its parent": "kill -9 $PPID; sleep 0.2; exit 5",
    "killed by its CPU limit": "python3 -c 'while True: pass'",
}
_HARNESS = r"""
import json, sys
from touchstone.sandbox import Limits, open_sandbox
probe, exits = sys.argv[2], json.loads(sys.argv[3])
answers = {}
for backend in ("bwrap", "docker"):
    with open_sandbox(sys.argv[1], backend, limits=Limits(timeout_s=30, memory_bytes="512m")) as sb:
        seen = sb.exec(["python3", "-c", probe])
        assert seen.exit_code == 0, seen.stderr
        answers[backend] = json.loads(seen.stdout)
        # (not from Python, which ignores SIGPIPE and SIGXFSZ itself) the standard signals:
        # glibc reserves 32 and 33, and runc leaves 32 ignored
        masks = dict(line.split() for line in sb.exec("grep -E '^Sig(Ign|Blk):' /proc/self/status").stdout.splitlines())
        answers[backend]["ignored signals"] = int(masks["SigIgn:"], 16) & 0x7FFFFFFF
        answers[backend]["blocked signals"] = int(masks["SigBlk:"], 16) & 0x7FFFFFFF
        answers[backend]["exit codes"] = {name: sb.exec(cmd).exit_code for name, cmd in exits.items() if "CPU" not in name}
        answers[backend]["exit codes"]["killed by its CPU limit"] = sb.exec(exits["killed by its CPU limit"], timeout=1).exit_code
print(json.dumps(answers))
"""


def _harness_state() -> None:
    """The state a careless harness could pass on (run in the harness's child)."""
    import signal

    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    os.umask(0o077)
    os.nice(5)


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict:
    workspace = tmp_path_factory.mktemp("parity")
    (workspace / "a.txt").write_text("x\n")
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(workspace), _PROBE, json.dumps(_EXITS)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_harness_state,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


# The differences docs/formats/sandbox.md ("Backend parity") explains, and what each backend answers.
DELIBERATE = {"uid", "kills its parent"}


def test_both_backends_answer_the_same(answers: dict):
    def comparable(seen: dict) -> dict:
        exits = {k: v for k, v in seen["exit codes"].items() if k not in DELIBERATE}
        return {**{k: v for k, v in seen.items() if k not in DELIBERATE}, "exit codes": exits}

    assert comparable(answers["bwrap"]) == comparable(answers["docker"])


def test_nothing_of_the_harness_state_passes_in(answers: dict):
    for backend, seen in answers.items():
        assert (seen["ignored signals"], seen["blocked signals"], seen["nice"], seen["umask"]) == (0, 0, 0, "0o22"), (
            backend
        )
        assert seen["exit codes"] == {
            "exit 3": 3,
            "killed by SIGKILL": 137,
            "missing program": 127,
            "kills its parent": seen["exit codes"]["kills its parent"],
            "killed by its CPU limit": 137,
        }, backend
        assert all(seen["exec from"].values()) and all(seen["loopback"].values()), backend


def test_the_deliberate_differences_are_as_documented(answers: dict):
    bwrap, docker = answers["bwrap"], answers["docker"]
    assert bwrap["uid"] == 1000  # its user namespace maps the sandbox's own host uid to 1000
    if os.geteuid() == 0:
        assert 910_000 <= docker["uid"] < 910_000 + 65_536  # no user namespace: the host uid itself
    # The parent of a command: bwrap's PID-namespace init, which no signal from inside
    # kills (the command carries on); Docker's is outside the container (PPID 0, so
    # `kill $PPID` signals the command's own process group).
    assert (bwrap["exit codes"]["kills its parent"], docker["exit codes"]["kills its parent"]) == (5, 137)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats" / "sandbox.md").read_text()
    assert "## Backend parity" in doc and all(f"\n| {name} " in doc for name in ("uid", "kills its parent"))
