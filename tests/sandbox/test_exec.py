"""exec: exit codes, environment, the tools every task relies on, output handling."""

from __future__ import annotations

import os

import pytest

from touchstone.sandbox import BASE_ENV, SandboxError


def test_exit_codes_and_streams(sb):
    ok = sb.exec("echo out; echo err >&2")
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.ok) == (0, "out\n", "err\n", True)
    assert (ok.stdout_bytes, ok.signal, ok.timed_out, ok.oom_killed) == (4, None, False, False)
    assert sb.exec("exit 3").exit_code == 3
    assert sb.exec(["false"]).exit_code == 1
    killed = sb.exec("kill -TERM $$")
    assert (killed.exit_code, killed.signal) == (143, 15)
    assert sb.exec(["no-such-program"]).exit_code == 127


def test_argv_is_not_shell_parsed(sb):
    r = sb.exec(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME", ";"])
    assert r.stdout == "['a b', '$HOME', ';']\n"


def test_same_environment_in_every_backend(sb):
    r = sb.exec("id -u; id -un; pwd; echo $HOME; python --version; python3 -m pytest --version; git --version")
    lines = r.stdout.splitlines()
    # bwrap maps the sandbox's host uid to 1000 in its user namespace; Docker has none per container
    uid = 1000 if sb.backend == "bwrap" else (sb.host_user.uid if sb.host_user else os.getuid())
    assert lines[:4] == [str(uid), "agent", "/workspace", "/home/agent"], r
    assert lines[4].startswith("Python 3.11.")
    assert r.stderr.startswith("pytest ") or lines[5].startswith("pytest ")
    assert lines[-1].startswith("git version")


def test_environment_is_exactly_base_plus_caller(sb):
    r = sb.exec(["env", "-0"], env={"EXTRA": "1"})
    env = dict(item.split("=", 1) for item in r.stdout.split("\0") if item)
    env.pop("PWD", None), env.pop("SHLVL", None), env.pop("_", None), env.pop("HOSTNAME", None)
    assert env == {**BASE_ENV, "EXTRA": "1"}


def test_pytest_runs_the_workspace_tests(sb):
    r = sb.exec("python -m pytest -q tests")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_only_the_workspace_survives_between_execs(sb):
    sb.exec("echo x > /tmp/scratch; echo y > ~/dot; echo z > kept")
    r = sb.exec("cat /tmp/scratch ~/dot kept")
    assert r.stdout == "z\n"


def test_output_flood_is_truncated_with_true_counts(sb):
    r = sb.exec("head -c 5000000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero >&2")
    assert r.stdout_bytes == 5_000_000 and r.stderr_bytes == 100_000
    assert len(r.stdout) == sb.limits.output_bytes and r.stdout_truncated and r.stderr_truncated
    assert r.stdout == "a" * sb.limits.output_bytes


def test_non_utf8_output_is_safe(sb):
    r = sb.exec("printf 'ok\\xff\\xfe\\x80end'")
    assert r.stdout.startswith("ok") and r.stdout.endswith("end") and "\ufffd" in r.stdout
    assert r.stdout_bytes == 8


def test_bad_arguments(sb):
    with pytest.raises(SandboxError, match="empty command"):
        sb.exec([])
    with pytest.raises(SandboxError, match="timeout must be positive"):
        sb.exec("true", timeout=0)
    with pytest.raises(SandboxError, match="environment variable"):
        sb.exec("true", env={"A=B": "x"})


def test_no_file_descriptor_leaks(workspace, sandbox_backend):
    import os

    from touchstone.sandbox import open_sandbox

    def cycle():
        with open_sandbox(workspace, sandbox_backend) as box:
            box.exec("echo hi"), box.exec(["true"]), box.exec("sleep 5", timeout=0.2)

    for _ in range(2):  # first-use caches settle (the Docker client's connection pool fills)
        cycle()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        cycle()
    assert len(os.listdir("/proc/self/fd")) <= before + 1


def test_threads_sharing_a_sandbox_take_turns(sb):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: sb.exec(f"echo {n}"), range(8)))
    assert [r.stdout for r in results] == [f"{n}\n" for n in range(8)]


def test_scratch_state_does_not_survive_an_exec(sb):
    setup = (
        "echo x > /tmp/t; echo x > ~/h; echo x > /dev/shm/s; "
        "python3 -c 'from multiprocessing import shared_memory as m; m.SharedMemory(\"kept\", create=True, size=64)'"
    )
    assert sb.exec(setup + "; ipcmk -M 64 && ipcmk -Q").exit_code == 0
    r = sb.exec(
        "ls -A /tmp ~ /dev/shm; python3 -c 'from multiprocessing import shared_memory as m; m.SharedMemory(\"kept\")'"
    )
    assert "t\n" not in r.stdout and "h\n" not in r.stdout and "s\n" not in r.stdout
    assert "FileNotFoundError" in r.stderr
    assert sb.exec("cat /proc/sysvipc/shm /proc/sysvipc/msg | wc -l").stdout.strip() == "2"  # headers only


def test_a_forked_harness_can_open_sandboxes(sb, workspace):
    import multiprocessing

    def child(queue):
        from touchstone.sandbox import open_sandbox

        with open_sandbox(workspace, sb.backend) as box:
            queue.put(box.exec("echo from child").stdout)

    sb.exec("true")  # the parent's launcher machinery is in use before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    assert queue.get(timeout=60) == "from child\n"
    proc.join(30)
    assert proc.exitcode == 0
    assert sb.exec("echo parent").stdout == "parent\n"
