"""The bubblewrap backend: no daemon, a few milliseconds per command.

Every exec is a fresh `bwrap` whose root is the read-only sandbox root filesystem
(the same one the Docker image is imported from), with new user, PID, network,
IPC, UTS and cgroup namespaces, the workspace bound read-write at /workspace, and
fresh size-limited tmpfs at /tmp and $HOME. Because the command runs as PID 2 of a
new PID namespace under bwrap's init, killing that init (on timeout, or when the
harness dies: --die-with-parent) kills every process it left, grandchildren and
daemons included. Memory, process and CPU limits come from a per-sandbox cgroup;
rlimits are a second line (and the only one where cgroups are unavailable)."""

from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import subprocess
import threading
import time

from touchstone.sandbox.base import SANDBOX_GID, SANDBOX_HOME, SANDBOX_UID, WORKSPACE, ExecResult, Sandbox
from touchstone.sandbox.capture import StreamCapture
from touchstone.sandbox.cgroups import Cgroup
from touchstone.sandbox.errors import SandboxError
from touchstone.sandbox.image import ensure_rootfs


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def _start(self) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap is not installed: apt-get install -y bubblewrap")
        self._rootfs = ensure_rootfs()
        lim = self.limits
        self._cgroup = Cgroup.create(f"touchstone-{self.id}", lim.memory_bytes, lim.processes, lim.cpus)
        if self._cgroup is None and os.geteuid() == 0:
            # RLIMIT_NPROC does not bind root: without a pids cgroup a fork bomb would reach the host.
            raise SandboxError(
                "the bwrap backend runs as root here but cannot create cgroups under /sys/fs/cgroup, "
                "so process and memory limits cannot be enforced; run as a normal user or use --backend docker"
            )
        self._prefix = self._bwrap_args()

    def _bwrap_args(self) -> list[str]:
        tmp_size = str(self.limits.tmp_bytes)
        args = [
            "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--hostname", "sandbox",
            "--ro-bind", str(self._rootfs), "/", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", tmp_size, "--tmpfs", "/tmp",
            "--perms", "0700", "--size", tmp_size, "--tmpfs", SANDBOX_HOME,
            "--bind", str(self._workspace), WORKSPACE,
        ]
        if any(m.target.startswith("/mnt/") for m in self.mounts):
            args += ["--tmpfs", "/mnt"]  # mount points cannot be created on the read-only root
        for mount in self.mounts:
            args += ["--ro-bind" if mount.read_only else "--bind", str(mount.host), mount.target]
        return args + ["--chdir", WORKSPACE, "--clearenv"]

    def _exec(self, argv: list[str], timeout: float, env: dict[str, str]) -> ExecResult:
        cmd = list(self._prefix)
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        info_read, info_write = os.pipe()  # bwrap reports on it once the sandbox is set up
        cmd += ["--info-fd", str(info_write), "--", *argv]
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        out, err = StreamCapture(self.limits.output_bytes), StreamCapture(self.limits.output_bytes)
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=self._child_setup(timeout), start_new_session=True, pass_fds=(info_write,),
        )
        os.close(info_write)
        readers = [threading.Thread(target=c.drain, args=(p.fileno(),), daemon=True)
                   for c, p in ((out, proc.stdout), (err, proc.stderr))]
        for reader in readers:
            reader.start()
        run = _Run(proc, self._cgroup)
        timer = threading.Timer(timeout, run.kill, kwargs={"timed_out": True})
        timer.start()
        try:
            status, usage = run.wait()
        except BaseException:  # KeyboardInterrupt: leave nothing running
            run.kill()
            raise
        finally:
            timer.cancel()
            timer.join()  # a kill in progress finishes before we go on (and maybe close)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        for reader in readers:
            reader.join()
        proc.stdout.close()
        proc.stderr.close()
        with os.fdopen(info_read, "rb") as info:
            started_ok = bool(info.read())
        if not started_ok and not run.timed_out:
            raise SandboxError(f"bwrap could not set up the sandbox: {err.head.decode(errors='replace').strip()}")
        return self._result(proc.returncode, run.timed_out, oom_before, wall,
                            usage.ru_utime + usage.ru_stime, out, err)

    def _result(self, code: int, timed_out: bool, oom_before: int, wall: float, cpu: float,
                out: StreamCapture, err: StreamCapture) -> ExecResult:
        # bwrap reports a command killed by signal N as exit status 128+N; a negative
        # code means bwrap itself was killed (by us, on timeout).
        if code < 0:
            code = 128 - code
        sig = code - 128 if 128 < code <= 128 + 64 else None
        oom = bool(self._cgroup and self._cgroup.oom_kills() > oom_before)
        return ExecResult(exit_code=code, signal=sig, timed_out=timed_out, oom_killed=oom, wall_s=wall,
                          cpu_s=cpu, backend=self.backend, **out.fields("stdout"), **err.fields("stderr"))

    def _child_setup(self, timeout: float):
        """Runs in the forked child before exec: join the cgroup, set rlimits."""
        lim = self.limits
        cgroup = self._cgroup
        # With a memory cgroup, the address-space cap is only a backstop (so that the
        # cgroup's OOM killer, which we can report, acts first); without one it is the limit.
        address_space = lim.memory_bytes * 4 if cgroup else lim.memory_bytes
        nproc = lim.processes * 4 if cgroup else lim.processes
        cpu_seconds = math.ceil(timeout * max(1.0, lim.cpus)) + 1
        rlimits = {
            resource.RLIMIT_AS: address_space,
            resource.RLIMIT_NPROC: nproc,
            resource.RLIMIT_FSIZE: lim.workspace_bytes,
            resource.RLIMIT_CPU: cpu_seconds,
            resource.RLIMIT_CORE: 0,
        }

        def setup() -> None:
            if cgroup:
                cgroup.join()
            for kind, value in rlimits.items():
                resource.setrlimit(kind, (value, value))

        return setup

    def _stop(self) -> None:
        if self._cgroup:
            self._cgroup.kill_all()
            self._cgroup.remove()


class _Run:
    """One running bwrap: waited for without a window in which a timeout could
    signal a recycled PID (the process is reaped only after `finished` is set)."""

    def __init__(self, proc: subprocess.Popen, cgroup: Cgroup | None):
        self.proc = proc
        self.cgroup = cgroup
        self.timed_out = False
        self._finished = False
        self._lock = threading.Lock()

    def wait(self) -> tuple[int, resource.struct_rusage]:
        os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        with self._lock:
            self._finished = True
        _, status, usage = os.wait4(self.proc.pid, 0)
        return status, usage

    def kill(self, timed_out: bool = False) -> None:
        """Kill bwrap (its init then takes the whole PID namespace down) and, to be
        sure, everything left in the cgroup."""
        with self._lock:
            if self._finished:
                return
            self.timed_out = timed_out
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.cgroup:
            self.cgroup.kill_all()
